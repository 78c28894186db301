"""`floodgate dlq` on a live broker: a group's dead letters listed, shown with where
they came from and how often they were tried, and resent to their topic (traced)."""

from __future__ import annotations

import time

import pytest

from broker_core.client.consumer import Consumer
from broker_core.client.producer import Producer
from broker_core.cluster.ports import free_port_range
from console.cli import main

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from broker_core.cluster.launcher import Cluster

    c = Cluster(1, free_port_range(2), tmp_path_factory.mktemp("dlq"))
    c.up()
    with Producer(c.file.addrs) as p:
        for i in range(5):
            p.send("payments", b"pay-%d" % i, keys=f"order-{i}")
    # a handler that fails pay-2 and pay-4; no retries: straight to the dead letters
    with Consumer("settle", "payments", c.file.addrs, max_reconsume=0) as consumer:
        handled = []
        deadline = time.monotonic() + 20
        while len(handled) < 5 and time.monotonic() < deadline:
            for m in consumer.poll(timeout=0.2):
                handled.append(m.body)
                if m.body in (b"pay-2", b"pay-4"):
                    assert consumer.nack(m) == "dlq"
            consumer.commit()
    yield c
    c.down(grace=3)


def dlq(cluster, *args: str) -> int:
    return main(["dlq", args[0], "--cluster", str(cluster.path), *args[1:]])


def test_list_and_show_name_the_dead_letters(cluster, capsys):
    assert dlq(cluster, "list") == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert ["settle", "2", "0"] in rows
    assert dlq(cluster, "show", "--group", "settle") == 0
    *out, hint = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and all("from payments" in line and "tried 1 times" in line
                                  for line in out)
    assert "keys order-2" in out[0] and "keys order-4" in out[1]
    assert f"floodgate trace --cluster {cluster.path} --id ID" in hint


def test_resend_by_key_sends_it_back_to_its_topic(cluster, capsys):
    assert dlq(cluster, "resend", "--group", "settle", "--key", "order-4", "--dry-run") == 0
    assert capsys.readouterr().out.startswith("1 dead letter(s) would be sent back")
    assert dlq(cluster, "resend", "--group", "settle", "--key", "order-4") == 0
    assert "sent 1 dead letter(s) back" in capsys.readouterr().out
    with Consumer("recheck", "payments", cluster.file.addrs) as c:
        got = []
        deadline = time.monotonic() + 10
        while len(got) < 6 and time.monotonic() < deadline:
            got += c.poll(timeout=0.2)
    assert sorted(m.body for m in got) == sorted([b"pay-%d" % i for i in range(5)] + [b"pay-4"])
    again = [m for m in got if m.body == b"pay-4" and "ORIGIN_MSG_ID" in m.properties]
    assert len(again) == 1 and "RETRY_TIMES" not in again[0].properties


def test_export_writes_each_dead_letter_as_a_json_line(cluster, capsys, tmp_path):
    import base64
    import json

    out = tmp_path / "settle.jsonl"
    assert dlq(cluster, "export", "--group", "settle", "--out", str(out)) == 0
    assert "2 dead letter(s) of settle written" in capsys.readouterr().err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [base64.b64decode(r["body_b64"]) for r in rows] == [b"pay-2", b"pay-4"]
    assert all(r["origin_topic"] == "payments" and r["tries"] == "1" for r in rows)
    assert [r["keys"] for r in rows] == ["order-2", "order-4"]
    assert dlq(cluster, "export", "--group", "settle", "--out", str(out)) == 2  # kept as is
    assert "exists" in capsys.readouterr().err
    assert dlq(cluster, "export", "--group", "settle") == 0  # to standard output
    assert capsys.readouterr().out == out.read_text()


@pytest.mark.parametrize(("args", "message"), [
    (["resend", "--group", "settle", "--id", "nosuch"], "bad message id 'nosuch'"),
    (["resend", "--group", "settle", "--all", "--rate", "0"], "--rate must be > 0"),
    (["show", "--group", "settle", "--limit", "0"], "--limit must be >= 1"),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(cluster, capsys, args, message):
    try:
        code = dlq(cluster, *args)
    except SystemExit as exc:  # a numeric flag's range: refused as the line is read
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize(("args", "message"), [
    (["--id", "7F00000100005D7F00000000DEADBEEF"], "no dead letter 7F00000100005D7F00000000DEADBEEF"),
    (["--key", "order-404"], "no dead letter with key 'order-404' for group settle"),
])  # fmt: skip
def test_a_well_formed_id_or_key_that_is_no_dead_letter_fails_with_exit_1(cluster, capsys,
                                                                          args, message):
    assert dlq(cluster, "resend", "--group", "settle", *args) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_replicated_group_counts_its_dead_letters_once_and_shows_them_without_its_master(
        tmp_path, zookeeper, capsys):
    """A slave holds its master's copy of the dead letters: counted once; with the master
    gone, `show` reads them from the slave (or the slave promoted) and then fails naming
    the broker that did not answer."""
    import signal
    import uuid

    from broker_core.cluster.launcher import Cluster
    from broker_core.cluster.roles import group_records
    from broker_core.ha.routes import routes_for

    c = Cluster(0, free_port_range(7), tmp_path, segment_size="8M", groups=1, replicas=2,
                replication="sync", zk=zookeeper.addr, name=f"t{uuid.uuid4().hex[:8]}")
    c.up(timeout=60)
    routes = routes_for(c.file)
    try:
        with Producer(None, routes=routes) as p:
            p.send("refunds", b"refund-1", keys="order-9")  # acked once the slave has it
        with Consumer("settle", "refunds", None, routes=routes, max_reconsume=0) as consumer:
            deadline = time.monotonic() + 20
            sent_back = []
            while not sent_back and time.monotonic() < deadline:
                sent_back = [consumer.nack(m) for m in consumer.poll(timeout=0.2)]
            assert sent_back == ["dlq"]
            consumer.commit()
        capsys.readouterr()
        assert dlq(c, "list") == 0
        rows = [line.split() for line in capsys.readouterr().out.splitlines()]
        assert ["settle", "1", "0"] in rows, rows

        master = group_records(c.file)["group-1"].master
        c.procs[master].send_signal(signal.SIGKILL)
        c.procs[master].wait(10)
        assert dlq(c, "show", "--group", "settle") == 1
        out, err = capsys.readouterr()
        assert len(out.splitlines()) == 2 and "keys order-9" in out, out  # and the hint
        assert f"1 broker(s) failed: {master} at 127.0.0.1:" in err, err
        assert dlq(c, "export", "--group", "settle") == 1  # not a partial export
        assert capsys.readouterr().out == ""
    finally:
        routes.close()
        c.down(grace=3)
