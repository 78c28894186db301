"""`floodgate topic` on a live two-broker cluster: topics made, listed, changed and
deleted on every broker; a read-only topic and a broker whose writes are wiped
refuse sends (NO_PERMISSION, nothing stored) while producers go to the broker that
takes them; bad input one line each, before any broker is asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.client.attempts import SendFailed
from broker_core.client.producer import Producer
from broker_core.cluster.ports import free_port_range
from broker_core.protocol import Code
from console.cli import main

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from broker_core.cluster.launcher import Cluster

    c = Cluster(2, free_port_range(4), tmp_path_factory.mktemp("topics"))
    c.up()
    yield c
    c.down(grace=3)


def topic(cluster, *args: str) -> int:
    return main(["topic", args[0], "--cluster", str(cluster.path), *args[1:]])


def producer(cluster) -> Producer:
    return Producer({b.name: b.addr for b in cluster.file.brokers}, retries=1)


def test_made_listed_changed_and_deleted_on_every_broker(cluster, capsys):
    assert topic(cluster, "create", "--topic", "orders", "--queues", "8") == 0
    out = capsys.readouterr().out
    assert out.count("orders 8 queues, perm rw") == 2
    assert topic(cluster, "create", "--topic", "orders") == 1
    assert "exists on broker-1, broker-2: `floodgate topic update`" in capsys.readouterr().err
    assert topic(cluster, "update", "--topic", "orders", "--queues", "4") == 2
    assert "has 8 queues; they can only grow" in capsys.readouterr().err
    with producer(cluster) as p:
        for i in range(10):
            p.send("orders", b"o%d" % i)
    assert topic(cluster, "list", "--topic", "orders") == 0
    out = capsys.readouterr().out
    assert "broker-1: writable" in out and "broker-2: writable" in out
    assert [line.split() for line in out.splitlines() if line.startswith("orders ")] == [
        ["orders", "8", "rw", "10", "2"]]
    assert "hottest queues" in out

    assert topic(cluster, "delete", "--topic", "orders") == 2
    assert "drops its queues and every group's offsets on 2 broker(s) (10 messages" in \
        capsys.readouterr().err
    assert topic(cluster, "delete", "--topic", "orders", "--yes") == 0
    assert capsys.readouterr().out.count("deleted orders (8 queues)") == 2
    for b in cluster.file.brokers:
        assert not (Path(b.data) / "store" / "consumequeue" / "orders").exists()
    assert topic(cluster, "list", "--topic", "orders") == 1
    assert "no broker has topic 'orders'" in capsys.readouterr().err


def test_a_read_only_topic_refuses_sends_and_stores_nothing(cluster, capsys):
    assert topic(cluster, "create", "--topic", "ledger", "--perm", "r") == 0
    with producer(cluster) as p, pytest.raises(SendFailed) as refused:
        p.send("ledger", b"x")
    assert refused.value.code == Code.NO_PERMISSION
    assert "no broker takes this send" in str(refused.value)
    assert "topic 'ledger' is not writable on broker-" in str(refused.value)
    assert topic(cluster, "update", "--topic", "ledger", "--perm", "rw") == 0
    with producer(cluster) as p:
        assert p.send("ledger", b"y").status == "SEND_OK"
    capsys.readouterr()
    assert topic(cluster, "list", "--topic", "ledger", "--json") == 0
    assert '"messages": 1' in capsys.readouterr().out  # the refused send left nothing


def test_a_broker_whose_writes_are_wiped_is_passed_over_and_takes_them_back(cluster, capsys):
    assert topic(cluster, "wipe-write", "--broker", "broker-1") == 0
    assert "broker-1: writes wiped" in capsys.readouterr().out
    try:
        with producer(cluster) as p:
            landed = {p.send("drain", b"m%d" % i).broker for i in range(20)}
        assert landed == {"broker-2"}
        assert topic(cluster, "list") == 0
        assert "broker-1: WRITES WIPED" in capsys.readouterr().out
    finally:
        assert topic(cluster, "restore-write", "--broker", "broker-1") == 0
    with producer(cluster) as p:
        landed = {p.send("drain", b"n%d" % i).broker for i in range(20)}
    assert landed == {"broker-1", "broker-2"}


@pytest.mark.parametrize(("args", "message"), [
    (["create", "--topic", "bad topic!"], "illegal topic name 'bad topic!'"),
    (["create", "--topic", "orders.eu"], "illegal topic name 'orders.eu'"),  # no store takes it
    (["create", "--topic", "t", "--queues", "0"], "--queues must be within [1, 1024], got 0"),
    (["create", "--topic", "t", "--perm", "x"], "permission must be one of rw, r, w, -"),
    (["delete", "--topic", "%bad topic"], "illegal topic name '%bad topic'"),
    (["wipe-write", "--broker", "nosuch"], "not in "),
    (["list", "--hottest", "-1"], "--hottest must be >= 0, got -1"),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(cluster, capsys, args, message):
    try:
        code = topic(cluster, *args)
    except SystemExit as exc:  # a numeric flag's range: refused as the line is read
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_the_brokers_own_topics_take_no_sends_and_cannot_be_made(cluster, capsys):
    """An op record a client wrote into %TX_OP% would settle a stranger's transaction;
    a message in %SCHEDULE% without its real topic is dropped when due (RocketMQ refuses
    sends to its system topics too)."""
    with producer(cluster) as p:
        for own in ("%TX_OP%", "%TX_HALF%", "%SCHEDULE%"):
            with pytest.raises(SendFailed) as refused:
                p.send(own, b"COMMIT 0 operator")
            assert refused.value.code == Code.NO_PERMISSION
            assert f"topic {own!r} is the broker's own" in str(refused.value)
    assert topic(cluster, "create", "--topic", "%TX_OP%") != 0
    assert "is the broker's own" in capsys.readouterr().err
    assert topic(cluster, "list") == 0
    assert "%TX_OP%" not in capsys.readouterr().out


def test_an_update_that_changes_nothing_is_refused(cluster, capsys):
    assert topic(cluster, "create", "--topic", "quiet") == 0
    capsys.readouterr()
    assert topic(cluster, "update", "--topic", "quiet") == 2
    assert "say what to change: --queues and/or --perm" in capsys.readouterr().err



def test_with_a_broker_down_list_shows_the_others_and_a_change_touches_none(
        cluster, capsys, tmp_path):
    """`list` is read when a broker is down: what the others hold, then a failure naming
    the missing one; a change is refused before any broker is asked (not half made)."""
    from dataclasses import replace

    from broker_core.cluster.cluster_file import BrokerEntry, load_cluster

    assert topic(cluster, "create", "--topic", "audit") == 0
    spec = load_cluster(cluster.path)
    port = free_port_range(2)
    spec = replace(spec, brokers=[*spec.brokers, BrokerEntry(
        "broker-3", f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}")])
    spec.save(tmp_path / "cluster.toml")
    capsys.readouterr()
    at = ["--cluster", str(tmp_path / "cluster.toml")]
    assert main(["topic", "list", *at, "--topic", "audit"]) == 1
    out, err = capsys.readouterr()
    assert "broker-1: writable" in out and "broker-2: writable" in out, out
    assert any(line.startswith("audit ") for line in out.splitlines()), out
    assert f"1 broker(s) failed: broker-3 at 127.0.0.1:{port + 1}" in err, err
    assert main(["topic", "update", *at, "--topic", "audit", "--queues", "16"]) == 1
    assert "broker-3" in capsys.readouterr().err
    assert topic(cluster, "list", "--topic", "audit") == 0
    out = capsys.readouterr().out
    assert [line.split()[:2] for line in out.splitlines() if line.startswith("audit ")] == [
        ["audit", "4"]], out  # as made: the update reached no broker
    assert topic(cluster, "delete", "--topic", "audit", "--yes") == 0


@pytest.fixture(scope="module")
def replicated(tmp_path_factory, zookeeper):
    """One group of master + slave (sync) on the session's ZooKeeper, with its routes."""
    import uuid

    from broker_core.cluster.launcher import Cluster
    from broker_core.ha.routes import routes_for

    c = Cluster(0, free_port_range(7), tmp_path_factory.mktemp("replicated"),
                segment_size="8M", groups=1, replicas=2, replication="sync",
                zk=zookeeper.addr, name=f"t{uuid.uuid4().hex[:8]}")
    c.up(timeout=60)
    routes = routes_for(c.file)
    yield c, routes
    routes.close()
    c.down(grace=3)


def test_a_replicated_cluster_counts_each_copy_once(replicated, capsys):
    """A slave holds copies of its master's messages and offsets: 10 messages sent are
    10, not 20, and a queue's lag is counted on its master only."""
    import json

    from broker_core.client.consumer import Consumer
    from broker_core.cluster.roles import group_records
    from tests.waiting import wait_for

    c, routes = replicated
    assert topic(c, "create", "--topic", "orders", "--queues", "1") == 0
    with Producer(None, routes=routes, retries=1) as p:
        for i in range(10):
            p.send("orders", b"o%d" % i)  # acked once the slave holds it too
    capsys.readouterr()
    assert topic(c, "list", "--topic", "orders") == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            if line.startswith("orders ")]
    assert rows == [["orders", "1", "rw", "10", "2"]]

    with Consumer("billing", "orders", None, routes=routes) as consumer:
        got = []
        while len(got) < 4:
            got += consumer.poll(4 - len(got), timeout=1.0)
        consumer.commit()

    def copied() -> bool:  # the master's offsets reach its slave once a second
        assert main(["offsets", "show", "--group", "billing", "--cluster", str(c.path),
                     "--json"]) == 0
        docs = json.loads(capsys.readouterr().out)
        return len(docs) == 2 and all(
            [q["committed"] for q in doc["queues"]] == [4] for doc in docs.values())

    wait_for(copied, timeout=10, what="the slave's copy of the offsets")
    assert main(["offsets", "show", "--group", "billing", "--cluster", str(c.path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[:6] for line in out[1:-1]] == [
        [group_records(c.file)["group-1"].master, "orders", "0", "4", "10", "6"]]
    assert out[-1] == "total lag 6 over 1 queue(s)"
    assert topic(c, "delete", "--topic", "orders") == 2
    assert "on 2 broker(s) (10 messages no consumer" in capsys.readouterr().err


def test_a_load_sent_to_a_slave_says_who_the_master_is(replicated, capsys):
    """NOT_MASTER alone sent the operator to the logs: the broker's words name the master."""
    from broker_core.cluster.roles import group_records

    c, _routes = replicated
    master = group_records(c.file)["group-1"].master
    slave = next(b for b in c.file.brokers if b.name != master)
    addr = next(b.addr for b in c.file.brokers if b.name == master)
    assert main(["bench", "produce", "--brokers", slave.addr, "--count", "3",
                 "--topic", "orders"]) == 1  # fmt: skip
    out, err = capsys.readouterr()
    said = (f"{slave.name} is slave of group group-1", f"; master is {master} at {addr}")
    assert "errors NOT_MASTER: 3 (first: " in out and all(s in out for s in said)
    assert err.startswith("floodgate bench: error: no message was acknowledged: ")
    assert all(s in err for s in said)


def test_the_hottest_queues_are_the_clusters_n_in_one_column_each(capsys):
    """Each broker answers its own N hottest; the listing shows the cluster's N hottest
    (it showed 20 whatever N was), the rates in one column whatever the names' lengths."""
    from console.commands.topic_cmd import print_listing

    def hot(topic: str, queue: int, rate: float) -> dict:
        return {"topic": topic, "queue": queue, "rate": rate, "times_median": 1.0,
                "depth": 10, "hot": False}

    answers = {"group-1-a": {"hottest": [hot("demo", 0, 83.4), hot("demo-batch", 1, 3.5)]},
               "b-2": {"hottest": [hot("demo", 11, 42.8), hot("demo-batch", 2, 3.4)]}}
    print_listing(answers, {}, hottest_shown=3)
    lines = capsys.readouterr().out.splitlines()
    rows = lines[lines.index(next(ln for ln in lines if ln.startswith("hottest"))) + 1:]
    assert [r.split()[:2] for r in rows] == [["group-1-a", "demo/0"], ["b-2", "demo/11"],
                                             ["group-1-a", "demo-batch/1"]]
    assert len({r.index("msgs/s") for r in rows}) == 1
