"""What network faults must find right in a replicated group (brokers, ZooKeeper and
the controller on hosts of their own): a master cut off acknowledges nothing it
cannot keep, and a controller cut off promotes nobody."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest

from broker_core.client.connection import Connection
from broker_core.cluster import netfault, netns
from broker_core.cluster.launcher import Cluster
from broker_core.cluster.ports import free_port_range
from broker_core.cluster.roles import broker_role, group_records
from broker_core.protocol import STORED_CODES, Code, Op, OutMessage, encode_send
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180),
              pytest.mark.skipif(netns.unavailable() is not None,
                                 reason=str(netns.unavailable()))]


@pytest.fixture(scope="module")
def replicated(tmp_path_factory):
    """One sync-replicated group of two on namespaced hosts, for the module's tests (each
    heals what it cut; `group` waits for the group to serve again)."""
    cluster = Cluster(0, free_port_range(7), tmp_path_factory.mktemp("c"), segment_size="8M",
                      name=f"t{uuid.uuid4().hex[:8]}", groups=1, replicas=2,
                      replication="sync", netns=True)
    try:
        cluster.up(timeout=60)
        yield cluster
    finally:
        cluster.down(grace=5.0)


@pytest.fixture
def group(replicated):
    """(cluster, master, slave) as the group stands now (a test before may have moved its
    master), once its master serves with its slave in sync."""
    cluster = replicated
    netfault.heal(cluster.layout, cluster.data)

    def serving():
        rec = group_records(cluster.file)["group-1"]
        master = cluster.file.broker(rec.master)
        role = broker_role(master.addr)
        return role.get("role") == "MASTER" and role.get("in_sync") and master

    master = wait_for(serving, 30, "a master with its slave in sync", ignore=(OSError,))
    slave = next(b for b in cluster.file.brokers if b.name != master.name)
    return cluster, master, slave


def send_for(addr: str, seconds: float, every: float = 0.1) -> list[tuple[float, Code]]:
    """Sends for `seconds`, pipelined on one connection: (wall time begun, answer)."""
    conn = Connection(addr)
    began, futures = [], []
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            began.append(time.time())
            futures.append(conn.request(Op.SEND, encode_send("fence", -1,
                                                             OutMessage(b"x"))))
            time.sleep(every)
        answers = []
        for t, f in zip(began, futures, strict=True):
            try:
                answers.append((t, Code(f.result(15)[0])))
            except Exception:  # noqa: BLE001 - no answer: not an acknowledgement
                answers.append((t, None))
        return answers
    finally:
        conn.close()


def test_a_master_cut_off_from_zookeeper_and_its_slave_acks_nothing(group):
    """Its producers still reach it; its slave is promoted on the other side. Nothing
    after the cut is SEND_OK, and nothing begun after the promotion is stored."""
    cluster, master, slave = group
    layout, before = cluster.layout, group_records(cluster.file)["group-1"]
    others = [n for n in layout.hosts if n != master.name]
    netfault.partition(layout, cluster.data, [master.name, netns.CLIENTS], others)
    cut_at = time.time()
    try:
        answers = send_for(master.addr, 8.0)
    finally:
        netfault.heal(layout, cluster.data)
    rec = wait_for(lambda: (r := group_records(cluster.file)["group-1"]).epoch > before.epoch
                   and r, 20, "the slave promoted")
    assert rec.master == slave.name
    after_cut = [code for t, code in answers if t > cut_at + 0.5]
    assert after_cut and Code.OK not in after_cut, after_cut
    after_promotion = [code for t, code in answers if t > rec.changed]
    assert after_promotion and not [c for c in after_promotion if c in STORED_CODES], \
        after_promotion


def test_a_master_cut_off_from_its_slave_alone_never_answers_ok(group):
    """ZooKeeper still sees both: no failover, and sync sends are answered as stored on
    one copy (FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE), never SEND_OK."""
    cluster, master, slave = group
    before = group_records(cluster.file)["group-1"]
    netfault.partition(cluster.layout, cluster.data, [master.name], [slave.name])
    cut_at = time.time()
    try:
        answers = send_for(master.addr, 6.0)
    finally:
        netfault.heal(cluster.layout, cluster.data)
    after_cut = [code for t, code in answers if t > cut_at + 0.5]
    assert after_cut and Code.OK not in after_cut, after_cut
    assert set(after_cut) <= {Code.FLUSH_SLAVE_TIMEOUT, Code.SLAVE_NOT_AVAILABLE}, after_cut
    assert group_records(cluster.file)["group-1"].epoch == before.epoch
    wait_for(lambda: broker_role(master.addr).get("in_sync"), 20, "the slave back in sync")


def test_a_controller_cut_off_promotes_nobody(group):
    """The controller isolated, then the master paused past its session: nobody may
    promote (the controller cannot write the record), so the epoch stays."""
    cluster, master, _slave = group
    before = group_records(cluster.file)["group-1"]
    netfault.isolate(cluster.layout, cluster.data, "controller-1")
    pid = cluster.procs[master.name].pid
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(4.0)  # four ZooKeeper sessions of the master
        assert group_records(cluster.file)["group-1"].epoch == before.epoch
    finally:
        os.kill(pid, signal.SIGCONT)
        netfault.heal(cluster.layout, cluster.data)
    wait_for(lambda: broker_role(master.addr).get("role") == "MASTER"
             or group_records(cluster.file)["group-1"].epoch > before.epoch, 20,
             "the group served again")


def test_a_consumer_cut_off_from_a_live_master_reads_from_its_slave(group):
    """The master is alive and master in ZooKeeper, only the consumers' host cannot
    reach it: the group's messages come from the slave."""
    from broker_core.client.consumer import Consumer
    from broker_core.client.producer import Producer
    from broker_core.ha.routes import routes_for

    cluster, master, slave = group
    routes = routes_for(cluster.file)
    try:
        routes.wait()
        with Producer(routes=routes, fuse=False) as producer:
            assert {producer.send("orders", b"m%d" % i).status for i in range(100)} == \
                {"SEND_OK"}
        netfault.partition(cluster.layout, cluster.data, [netns.CLIENTS], [master.name])
        got = []
        with Consumer("billing", "orders", routes=routes) as consumer:
            deadline = time.monotonic() + 30
            while len(got) < 100 and time.monotonic() < deadline:
                got += consumer.poll(64, timeout=0.5)
        assert sorted(m.body for m in got) == sorted(b"m%d" % i for i in range(100))
        assert group_records(cluster.file)["group-1"].master == master.name  # no failover
    finally:
        netfault.heal(cluster.layout, cluster.data)
        routes.close()
