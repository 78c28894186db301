"""Replicated groups as real processes on a real ZooKeeper: kill -9 of a master
under load loses nothing acknowledged; a paused master is fenced (refuses, or cuts
its tail); a controller dying with a failover due hands it to the other; ZooKeeper
itself away for seconds promotes nobody; delayed messages and transactions' halves
pending on a killed master are settled by the new one."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest

from broker_core.client.connection import Connection
from broker_core.cluster.drill import DrillSpec, run_drill
from broker_core.cluster.launcher import Cluster
from broker_core.cluster.ports import free_port_range
from broker_core.cluster.roles import broker_role, failover_events, group_records
from broker_core.protocol import Code, Op, OutMessage, encode_send
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def ha_cluster(tmp_path, zookeeper):
    """`ha_cluster(groups, replicas, **kw)`: brokers and controllers on the session's
    ZooKeeper (zk=None: an embedded one of its own); all stopped at teardown."""
    clusters = []

    def make(groups=1, replicas=2, replication="sync", zk="shared", **kw):
        n = groups * replicas
        cluster = Cluster(0, free_port_range(3 * n + 1), tmp_path / f"c{len(clusters)}",
                          segment_size="8M", name=f"t{uuid.uuid4().hex[:8]}", groups=groups,
                          replicas=replicas, replication=replication,
                          zk=zookeeper.addr if zk == "shared" else zk, **kw)
        clusters.append(cluster)
        cluster.up(timeout=60)
        return cluster

    yield make
    for cluster in clusters:
        cluster.down(grace=5.0)


def record(cluster, group="group-1"):
    return group_records(cluster.file)[group]


def pid_of(cluster, name):
    return cluster.procs[name].pid


def send_raw(conn, body=b"x", timeout=10.0):
    return conn.request(Op.SEND, encode_send("fence", -1, OutMessage(body)))


def test_kill_9_master_under_load_loses_no_acked_message(ha_cluster):
    cluster = ha_cluster(groups=2, replicas=2)
    result = run_drill(cluster.file, DrillSpec(group="group-1", rate=400, duration=6,
                                               kill_after=2, timeout=3.0))
    doc = result.to_dict()
    assert result.lost == 0, doc
    assert result.acked + result.send_errors == result.sent == 2400, doc
    # idempotent sends within a 15 s deadline: those in flight to the killed master waited
    # for its slave's promotion and were stored once (at least once stored some twice)
    assert result.duplicates == 0 and result.send_errors == 0, doc
    assert result.acked > 1200 and result.read_back >= result.acked, doc
    assert {result.old_master, result.new_master} == {"group-1-a", "group-1-b"}, doc
    assert result.epoch_after == result.epoch_before + 1, doc
    assert result.failover_s is not None and result.failover_s < 10, doc
    assert result.acked_by_status.get("SEND_OK", 0) > 0, doc
    # its slave's reconnect was refused and it said so: failed over before the killed
    # master's ZooKeeper session ended (ha.down_reports)
    assert "reported down" in record(cluster).reason, record(cluster)
    events = failover_events(cluster.file)
    assert [(e["old_master"], e["new_master"]) for e in events] == \
           [(result.old_master, result.new_master)]


def test_paused_master_is_fenced_and_cuts_its_tail(ha_cluster):
    cluster = ha_cluster(groups=1, replicas=2)
    old = record(cluster)
    a, b = cluster.file.broker(old.master), cluster.file.broker(
        next(n for n in old.in_sync if n != old.master))
    conn = Connection(a.addr)
    assert Code(conn.call(Op.SEND, encode_send("fence", -1, OutMessage(b"before")))[0]) == \
        Code.OK
    os.kill(pid_of(cluster, a.name), signal.SIGSTOP)
    try:
        new = wait_for(lambda: (r := record(cluster)).epoch > old.epoch and r, 15, "failover")
        assert new.master == b.name
        # sends the paused master will read first thing when it runs again
        parked = [send_raw(conn, b"fenced %d" % i) for i in range(20)]
        wait_for(lambda: broker_role(b.addr).get("role") == "MASTER", 10, "new master")
    finally:
        os.kill(pid_of(cluster, a.name), signal.SIGCONT)
    answers = [Code(f.result(15)[0]) for f in parked]
    assert Code.OK not in answers, answers  # a fenced master acknowledges nothing
    state = wait_for(lambda: (s := broker_role(a.addr)).get("role") == "SLAVE"
                     and s.get("following", {}).get("connected") and s, 20, "old master follows")
    assert state["epoch"] == new.epoch
    # a master that resumes to silence refuses before storing (NOT_MASTER); whatever it
    # stored before it noticed is cut from its log when it follows the new master
    stored = [c for c in answers if c != Code.NOT_MASTER]
    cut = [e for e in state["events"] if e["kind"] == "truncated"]
    if stored:
        assert cut and cut[-1]["bytes"] > 0, (answers, state["events"])
    end_b = wait_for(lambda: broker_role(b.addr)["offset"], 5)
    wait_for(lambda: broker_role(a.addr)["offset"] == end_b, 10, "logs agree")
    conn.close()


def test_controller_killed_while_a_failover_is_due(ha_cluster):
    cluster = ha_cluster(groups=1, replicas=2, controllers=2)
    old = record(cluster)
    leader = wait_for(lambda: _leader(cluster), 10, "a leading controller")
    os.kill(cluster.controllers[leader].pid, signal.SIGKILL)
    os.kill(pid_of(cluster, old.master), signal.SIGKILL)
    new = wait_for(lambda: (r := record(cluster)).epoch > old.epoch and r, 20,
                   "failover by the other controller")
    assert new.epoch == old.epoch + 1 and new.master != old.master
    # the promoted broker serves as master of that epoch: the failover is over
    addr = cluster.file.broker(new.master).addr
    wait_for(lambda: (s := broker_role(addr)).get("role") == "MASTER"
             and s.get("epoch") == new.epoch, 10, "the new master serving")
    assert record(cluster).epoch == new.epoch  # promoted once


def test_zookeeper_away_for_seconds_promotes_nobody(ha_cluster):
    cluster = ha_cluster(groups=2, replicas=2, zk=None)  # a ZooKeeper of its own to pause
    before = group_records(cluster.file)
    masters = {g: r.master_addr for g, r in before.items()}
    conns = {g: Connection(addr) for g, addr in masters.items()}
    cluster.zookeeper.pause()
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3.0:  # brokers keep serving their roles meanwhile
            for conn in conns.values():
                code, _ = conn.call(Op.SEND, encode_send("zk", -1, OutMessage(b"z")), 5.0)
                assert Code(code) == Code.OK
    finally:
        cluster.zookeeper.resume()
    # sessions that expired with the outage are renewed: every broker registered again
    wait_for(lambda: _all_registered(cluster), 20, "every broker registered again")
    after = group_records(cluster.file)
    assert {g: (r.master, r.epoch) for g, r in after.items()} == \
           {g: (r.master, r.epoch) for g, r in before.items()}
    for b in cluster.file.brokers:
        role = broker_role(b.addr)
        assert role["role"] == ("MASTER" if b.name in {r.master for r in after.values()}
                                else "SLAVE")
    for conn in conns.values():
        conn.close()


def _all_registered(cluster) -> bool:
    from broker_core.cluster.roles import zk_client
    from broker_core.ha.records import Paths

    paths = Paths(cluster.file.name)
    with zk_client(cluster.file.zk) as zk:
        registered = {n for g in cluster.file.groups for n in zk.get_children(paths.brokers(g))}
    return registered == {b.name for b in cluster.file.brokers}


def _leader(cluster) -> str | None:
    from broker_core.cluster.roles import zk_client
    from broker_core.ha.records import Paths

    with zk_client(cluster.file.zk) as zk:
        contenders = zk.Election(Paths(cluster.file.name).election).contenders()
    return contenders[0] if contenders else None


def test_consumer_reads_from_the_slave_while_the_master_is_gone(ha_cluster):
    from broker_core.client.consumer import Consumer
    from broker_core.client.producer import Producer
    from broker_core.ha.routes import routes_for

    cluster = ha_cluster(groups=1, replicas=2)
    for proc in cluster.controllers.values():  # nobody will promote the slave
        proc.kill()
    routes = routes_for(cluster.file)
    try:
        routes.wait()
        with Producer(routes=routes, fuse=False) as producer:
            sent = {producer.send("orders", b"m%d" % i).status for i in range(200)}
        assert sent == {"SEND_OK"}
        os.kill(pid_of(cluster, routes.records["group-1"].master), signal.SIGKILL)
        got = []
        with Consumer("billing", "orders", routes=routes) as consumer:
            deadline = time.monotonic() + 20
            while len(got) < 200 and time.monotonic() < deadline:
                got += consumer.poll(64, timeout=0.5)
        assert sorted(m.body for m in got) == sorted(b"m%d" % i for i in range(200))
    finally:
        routes.close()


def test_delayed_messages_pending_on_a_killed_master_are_delivered_by_the_new_one(ha_cluster):
    from broker_core.client.consumer import Consumer
    from broker_core.client.producer import Producer
    from broker_core.ha.routes import routes_for

    cluster = ha_cluster(groups=1, replicas=2)
    old = record(cluster)
    routes = routes_for(cluster.file)
    try:
        routes.wait()
        with Producer(routes=routes) as p:  # sync replication: acked once the slave has it
            for i in range(30):
                assert p.send("later", b"d%d" % i, delay="1s").status == "SEND_OK"
        os.kill(pid_of(cluster, old.master), signal.SIGKILL)
        wait_for(lambda: record(cluster).master != old.master, 30, "the failover")
        with Consumer("g", "later", routes=routes) as c:
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(set(got)) < 30 and time.monotonic() < deadline:
                got += [m.body for m in c.poll(timeout=0.2)]
    finally:
        routes.close()
    assert set(got) == {b"d%d" % i for i in range(30)}  # at least once, none lost


def test_a_group_out_for_one_copy_comes_back_when_its_slave_is_in_sync(ha_cluster):
    """Its slave away, a sync master answers SLAVE_NOT_AVAILABLE and the producer's fuse
    isolates the group (one copy only); once the slave is back in sync, which the group
    record says, the fuse lets the group back then, not a minute later."""
    from broker_core.client.producer import Producer
    from broker_core.ha.routes import routes_for

    cluster = ha_cluster(groups=1, replicas=2)
    master = record(cluster).master
    slave = next(b for b in cluster.file.groups["group-1"] if b.name != master)
    routes = routes_for(cluster.file)
    try:
        routes.wait()
        with Producer(routes=routes) as producer:
            def events() -> list[tuple[str, str, str]]:
                return [(t.broker, t.event, t.reason)
                        for t in producer.fuse.snapshot().transitions]

            assert producer.send("orders", b"two copies").status == "SEND_OK"
            cluster.procs[slave.name].kill()
            cluster.procs[slave.name].wait(10)
            wait_for(lambda: producer.send("orders", b"one").status == "SLAVE_NOT_AVAILABLE",
                     30, "the master to answer one copy only")
            assert ("group-1", "isolate", "error") in events()
            cluster.start_broker(slave)
            wait_for(lambda: producer.send("orders", b"two").status == "SEND_OK"
                     and ("group-1", "release", "in-sync") in events(), 60,
                     "the group let back once its slave is in sync")
            assert ("group-1", "release", "expired") not in events()
    finally:
        routes.close()


def test_halves_pending_on_a_killed_master_are_settled_by_the_new_one(ha_cluster):
    """The slave copies %TX_HALF% and %TX_OP% record by record (the broker's own topics, in
    no topic table): promoted, it delivers what was committed before the kill, never what
    was rolled back, and checks back what was left open."""
    from broker_core.client.consumer import Consumer
    from broker_core.client.transaction import TransactionProducer
    from broker_core.ha.routes import routes_for

    cluster = ha_cluster(groups=1, replicas=2, extra_args=["--tx-check-s", "0.2"])
    old = record(cluster)
    routes = routes_for(cluster.file)
    try:
        routes.wait()
        with TransactionProducer("payments", routes=routes, end_oneway=False) as tx:
            for i in range(10):
                tx.send_in_transaction("paid", b"c%d" % i, lambda m: "COMMIT")
                tx.send_in_transaction("paid", b"r%d" % i, lambda m: "ROLLBACK")
                tx.send_in_transaction("paid", b"u%d" % i, lambda m: "UNKNOWN")
        os.kill(pid_of(cluster, old.master), signal.SIGKILL)
        wait_for(lambda: record(cluster).master != old.master, 30, "the failover")
        with TransactionProducer("payments", routes=routes, check=lambda m: "COMMIT",
                                 poll_s=0.1), Consumer("g", "paid", routes=routes) as c:
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(set(got)) < 20 and time.monotonic() < deadline:
                got += [m.body for m in c.poll(timeout=0.2)]
            got += [m.body for m in c.poll(timeout=1.0)]  # nothing rolled back behind them
    finally:
        routes.close()
    assert set(got) == {b"c%d" % i for i in range(10)} | {b"u%d" % i for i in range(10)}
