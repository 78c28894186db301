"""The controller's decision for one group (pure: records and registrations in,
the record to write out), and a controller against a real ZooKeeper."""

import threading

from broker_core.ha.controller import BOOTSTRAP_S, Controller, decide
from broker_core.ha.records import GroupRecord, Paths, Registration, read_record
from tests.waiting import wait_for


def reg(name, epoch=0):
    return Registration(name, "g", f"127.0.0.1:{1000 + ord(name[-1])}", "", f"h-{name}",
                        epoch=epoch)


def offsets(table):
    return lambda names: {n: table[n] for n in names if n in table}


def test_bootstrap_waits_briefly_then_takes_the_longest_log():
    alive = {"a": reg("a"), "b": reg("b", epoch=3)}
    assert decide(None, {"a": reg("a")}, offsets({}), 0.1, 0.0, expected=2) is None
    d = decide(None, alive, offsets({"a": 10, "b": 99}), BOOTSTRAP_S, 0.0)
    assert d.kind == "create" and d.record.master == "b" and d.record.epoch == 4
    assert d.record.in_sync == ("b",) and d.record.master_ha == "h-b"


def test_live_master_means_nothing_to_do_unless_it_moved():
    rec = GroupRecord("a", 2, ("a", "b"), reg("a").addr, "h-a")
    assert decide(rec, {"a": reg("a"), "b": reg("b")}, offsets({}), 9, 0) is None
    moved = Registration("a", "g", "127.0.0.1:5", "", "h-a2")
    d = decide(rec, {"a": moved}, offsets({}), 9, 0)
    assert d.kind == "update" and d.record.epoch == 2 and d.record.master_addr == "127.0.0.1:5"


def test_failover_promotes_the_in_sync_slave_with_the_longest_log():
    rec = GroupRecord("a", 2, ("a", "b", "c"), "x", "y")
    alive = {"b": reg("b"), "c": reg("c"), "d": reg("d")}
    d = decide(rec, alive, offsets({"b": 500, "c": 700, "d": 9999}), 9, 0)
    assert d.kind == "failover" and d.old_master == "a"
    assert (d.record.master, d.record.epoch, d.record.in_sync) == ("c", 3, ("c",))


def test_no_in_sync_slave_alive_promotes_nobody():
    rec = GroupRecord("a", 2, ("a", "b"), "x", "y")
    assert decide(rec, {"c": reg("c")}, offsets({"c": 10**9}), 9, 0) is None


def test_controller_on_zookeeper_creates_and_fails_over(zookeeper, zk_root):
    from kazoo.client import KazooClient

    cluster = zk_root.strip("/").replace("/", "_")
    paths = Paths(cluster)
    from kazoo.exceptions import ConnectionLoss

    # the observer's session also holds b's registration: long enough that a stall of
    # the server does not end it (only a's session is meant to end)
    zk = KazooClient(hosts=zookeeper.addr, timeout=5.0)
    zk.start(timeout=10)
    broker_a = KazooClient(hosts=zookeeper.addr, timeout=0.5)  # a's own session
    broker_a.start(timeout=10)
    # the controller's own session long too: it lost its lead to a server stall (a loaded
    # CI machine) between writing the failover and noting it; only a's session may end
    wall = iter(range(1_000, 2_000))  # the controller's own clock stamps what it writes
    controller = Controller(zookeeper.addr, cluster, session_s=5.0, broker_session_s=0.5,
                            wall=lambda: float(next(wall)))
    runner = threading.Thread(target=controller.run, daemon=True)
    try:
        runner.start()
        broker_a.create(paths.broker("g", "a"), reg("a").to_json(), ephemeral=True,
                        makepath=True)
        zk.create(paths.broker("g", "b"), reg("b").to_json(), ephemeral=True, makepath=True)
        record = wait_for(lambda: read_record(zk, paths, "g")[0], 15, "the group's record",
                          ignore=(ConnectionLoss,))
        assert (record.epoch, record.master) == (1, "a")  # equal logs: the first name
        assert 1_000 <= record.changed < 1_500  # a retried write takes the next tick
        # the master records b in sync, then its session ends
        rec, version = read_record(zk, paths, "g")
        zk.set(paths.record("g"), rec.with_in_sync({"b"}, 1_500.0).to_json(), version=version)
        broker_a.stop()
        new = wait_for(lambda: (r := read_record(zk, paths, "g")[0]).epoch == 2 and r, 15,
                       "the failover's record", ignore=(ConnectionLoss,))
        assert new.master == "b" and new.reason.startswith("failover")
        assert record.changed < new.changed < 1_500
        wait_for(lambda: len(controller.decisions) == 2, 15)  # noted just after the write
        assert [d.kind for d in controller.decisions] == ["create", "failover"]
    finally:
        controller.stop()
        runner.join(10)
        broker_a.stop()  # kazoo closes only a stopped client (stopped already: harmless)
        broker_a.close()
        zk.stop()
        zk.close()



def test_a_controller_just_started_judges_at_once_and_waits_only_after_an_outage(
        zookeeper, zk_root):
    """Its first connection is no outage: a group is created after the bootstrap wait, not
    after the 1.5 broker sessions (here 15 s) it waits once its own link came back."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import ConnectionLoss
    from kazoo.protocol.states import KazooState

    cluster = zk_root.strip("/").replace("/", "_")
    paths = Paths(cluster)
    zk = KazooClient(hosts=zookeeper.addr, timeout=5.0)
    zk.start(timeout=10)
    controller = Controller(zookeeper.addr, cluster, session_s=5.0, broker_session_s=10.0)
    runner = threading.Thread(target=controller.run, daemon=True)
    try:
        runner.start()
        for name in "ab":
            zk.create(paths.broker("g", name), reg(name).to_json(), ephemeral=True,
                      makepath=True)
        wait_for(lambda: read_record(zk, paths, "g")[0], BOOTSTRAP_S + 5, "the group's record",
                 ignore=(ConnectionLoss,))
        controller._on_state(KazooState.SUSPENDED)  # its link down, then back
        controller._on_state(KazooState.CONNECTED)
        assert controller._grace_until > controller._clock() + 14.0
    finally:
        controller.stop()
        runner.join(10)
        zk.stop()
        zk.close()


def test_a_master_restarted_between_two_looks_is_failed_over_all_the_same(zookeeper, zk_root):
    """A supervisor restarts a killed master, and it registers again within one round of
    its old session's end: the controller never sees the name missing, only under a new
    session. That is a master gone: its in-sync slave takes over (the demo's kill act
    once kept group-1 at its old epoch for good)."""
    from kazoo.client import KazooClient

    cluster = zk_root.strip("/").replace("/", "_") + "_restart"
    paths = Paths(cluster)
    now = [0.0]
    controller = Controller(zookeeper.addr, cluster, session_s=5.0, clock=lambda: now[0])
    zk = KazooClient(hosts=zookeeper.addr, timeout=5.0)
    sessions = [KazooClient(hosts=zookeeper.addr, timeout=5.0) for _ in range(3)]
    try:
        for client in (controller.zk, zk, *sessions):
            client.start(timeout=10)
        a_first, a_again, other = sessions
        a_first.create(paths.broker("g", "a"), reg("a").to_json(), ephemeral=True, makepath=True)
        zk.create(paths.broker("g", "b"), reg("b").to_json(), ephemeral=True, makepath=True)
        zk.ensure_path(paths.groups)
        controller.reconcile()
        now[0] = BOOTSTRAP_S
        assert [d.kind for d in controller.reconcile()] == ["create"]
        rec, version = read_record(zk, paths, "g")
        zk.set(paths.record("g"), rec.with_in_sync({"b"}, 1.0).to_json(), version=version)
        assert controller.reconcile() == []  # a alive, under the session it had
        other.create(paths.broker("g", "c"), reg("c").to_json(), ephemeral=True)
        assert controller.reconcile() == []  # another broker joining changes nothing
        a_first.stop()  # its session ends: the registration goes ...
        a_again.create(paths.broker("g", "a"), reg("a").to_json(), ephemeral=True)  # ... is back
        made = controller.reconcile()
        assert [(d.kind, d.record.master, d.record.epoch, d.old_master) for d in made] == [
            ("failover", "b", rec.epoch + 1, "a")]
        assert controller.reconcile() == []  # b leads; a (alive) is not news twice
    finally:
        for client in (controller.zk, zk, *sessions):
            client.stop()
            client.close()


def test_a_master_reported_down_is_failed_over_only_if_its_ports_refuse(zookeeper, zk_root):
    """The slave of a killed master reports it (its reconnect was refused); the controller
    asks the master's ports itself: listening, the report is dropped; refusing, the group
    fails over at once, before the master's session ends, and its registration goes. Then
    nothing is owed: an idle controller waits on its watches alone."""
    import socket

    from kazoo.client import KazooClient

    from broker_core.ha.down_reports import DownReport, read_down, report_down

    cluster = zk_root.strip("/").replace("/", "_") + "_down"
    paths = Paths(cluster)
    now = [0.0]
    controller = Controller(zookeeper.addr, cluster, session_s=5.0, clock=lambda: now[0])
    zk = KazooClient(hosts=zookeeper.addr, timeout=5.0)
    listening = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
    a = Registration("a", "g", *(f"127.0.0.1:{s.getsockname()[1]}" for s in listening[:1]),
                     "", f"127.0.0.1:{listening[1].getsockname()[1]}")
    try:
        for client in (controller.zk, zk):
            client.start(timeout=10)
        zk.create(paths.broker("g", "a"), a.to_json(), ephemeral=True, makepath=True)
        zk.create(paths.broker("g", "b"), reg("b").to_json(), ephemeral=True, makepath=True)
        zk.ensure_path(paths.groups)
        controller.reconcile()
        assert controller.next_look == BOOTSTRAP_S  # the bootstrap's wait is owed a look
        now[0] = BOOTSTRAP_S
        controller.next_look = None
        assert [d.kind for d in controller.reconcile()] == ["create"]
        assert controller.next_look is None  # nothing owed: watches only
        rec, version = read_record(zk, paths, "g")
        zk.set(paths.record("g"), rec.with_in_sync({"b"}, 1.0).to_json(), version=version)

        report_down(zk, paths, "g", DownReport("a", rec.epoch, "b", "refused", 1.0))
        assert controller.reconcile() == []  # a's ports answer: not gone
        assert read_down(zk, paths, "g") is None  # and the report dropped

        for s in listening:
            s.close()  # a's process is gone: its ports refuse
        report_down(zk, paths, "g", DownReport("a", rec.epoch, "b", "refused", 2.0))
        made = controller.reconcile()
        assert [(d.kind, d.record.master, d.old_master) for d in made] == [("failover", "b", "a")]
        assert "reported down" in made[0].record.reason
        assert zk.exists(paths.broker("g", "a")) is None  # its registration deleted
        assert read_down(zk, paths, "g") is None
        assert controller.reconcile() == [] and controller.next_look is None
    finally:
        for s in listening:
            s.close()
        for client in (controller.zk, zk):
            client.stop()
            client.close()
