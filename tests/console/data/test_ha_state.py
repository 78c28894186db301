"""Replicated groups in the console: role and epoch per broker, replication lag,
failovers as events and alerts, a master without a slave in sync, a group with
no master; the broker table grows its HA columns only for such clusters."""

from __future__ import annotations

from broker_core.observe.stats_doc import BrokerStats
from console.data.state import BrokerSample, build_state
from console.tui.panels.brokers import COLUMNS, columns_for, render


def doc(name, group, role, epoch, since=0.0, in_sync=("b",), lag_s=0.0, lag_bytes=0,
        replication="sync"):
    ha = {"group": group, "role": role, "epoch": epoch, "since": since,
          "replication": replication, "master": name if role == "MASTER" else "x"}
    if role == "MASTER":
        ha["in_sync"] = list(in_sync)
        ha["slaves"] = [{"name": n, "lag_bytes": lag_bytes, "lag_s": lag_s, "in_sync": True}
                        for n in in_sync]
    else:
        ha["following"] = {"lag_bytes": lag_bytes}
    send10 = {"count": 10, "msgs_per_s": 1.0, "p99": 0.001, "max": 0.002, "mean": 0.0005}
    return {"broker": name, "time": 1000, "ops": {"send": {"10s": send10}}, "ha": ha}


def sample(d, key):
    return BrokerSample(key, d["broker"], BrokerStats.from_dict(d))


def test_roles_lag_and_a_failover_seen_as_event_and_alert():
    s1 = build_state([sample(doc("g1-a", "g1", "MASTER", 1), "a"),
                      sample(doc("g1-b", "g1", "SLAVE", 1, lag_bytes=300), "b")], now=100)
    a, b = s1.brokers
    assert (a.role, a.epoch, a.in_sync, b.role, b.repl_lag_bytes) == ("MASTER", 1, 1, "SLAVE",
                                                                     300)
    assert not s1.active_alerts
    # a dies; b is promoted at epoch 2 with nobody in sync
    s2 = build_state([BrokerSample("a", "g1-a", None, "refused"),
                      sample(doc("g1-b", "g1", "MASTER", 2, since=101, in_sync=()), "b")],
                     prev=s1, now=102)
    texts = [e.text for e in s2.events]
    assert "failover: master of g1 at epoch 2 (was SLAVE); g1-a does not answer" in texts
    keys = {al.key for al in s2.active_alerts}
    assert {"failover:g1", "no-slave:g1"} <= keys
    assert next(al for al in s2.active_alerts if al.key == "no-slave:g1").severity == "critical"
    later = build_state([BrokerSample("a", "g1-a", None, "refused"),
                         sample(doc("g1-b", "g1", "MASTER", 2, since=101, in_sync=()), "b")],
                        prev=s2, now=200)
    assert "failover:g1" not in {al.key for al in later.active_alerts}  # a minute on


def test_no_master_and_slow_slave_alerts():
    s = build_state([sample(doc("g1-a", "g1", "SLAVE", 3), "a"),
                     sample(doc("g1-b", "g1", "NONE", 3), "b"),
                     sample(doc("g2-a", "g2", "MASTER", 1, lag_s=2.5, lag_bytes=10 << 20), "c")],
                    now=5)
    keys = {al.key for al in s.active_alerts}
    assert "no-master:g1" in keys and "repl-lag:g2-a" in keys


def test_ha_columns_only_for_replicated_clusters():
    plain = build_state([BrokerSample("h", "b1", BrokerStats.from_dict({"broker": "b1"}))],
                        now=1)
    assert columns_for(plain.brokers) == COLUMNS
    ha = build_state([sample(doc("g1-a", "g1", "MASTER", 4), "a")], now=1)
    labels = [c.label for c in columns_for(ha.brokers)]
    assert labels[:5] == ["broker", "state", "group", "role", "repl lag"]
    row = [c.cell(ha.brokers[0], ha.sla).plain for c in columns_for(ha.brokers)]
    assert row[2:4] == ["g1", "master e4"]
    assert render(ha).columns[3].header == "role"


def test_a_master_cut_off_from_the_console_but_not_its_slave_is_said_to_be_alive():
    """Unreachable from here while its slave still follows it: not plainly DOWN."""
    slave = doc("g1-b", "g1", "SLAVE", 1)
    slave["ha"]["following"] = {"master": "g1-a", "connected": True, "lag_bytes": 0}
    s1 = build_state([sample(doc("g1-a", "g1", "MASTER", 1), "a"), sample(slave, "b")],
                     now=1)
    s2 = build_state([BrokerSample("a", "g1-a", None, "timed out"), sample(slave, "b")],
                     prev=s1, now=2, down_after=1)
    a = s2.brokers[0]
    assert a.state == "DOWN"
    assert a.reason == "unreachable from here (timed out); alive to its peers: g1-b follows it"
    refused = build_state([BrokerSample("a", "g1-a", None, "connection refused"),
                           sample(slave, "b")], prev=s1, now=2, down_after=1)
    assert refused.brokers[0].reason == "connection refused"  # its host said: nothing there
    slave["ha"]["following"]["connected"] = False  # its slave lost it too: just down
    s3 = build_state([BrokerSample("a", "g1-a", None, "timed out"), sample(slave, "b")],
                     prev=s2, now=3, down_after=1)
    assert s3.brokers[0].reason == "timed out"


def test_a_failover_whose_old_master_still_answers_says_it_was_cut_off():
    """The controller's reason, and the old master answering: a partition from
    ZooKeeper, not a crash."""
    s1 = build_state([sample(doc("g1-a", "g1", "MASTER", 1), "a"),
                      sample(doc("g1-b", "g1", "SLAVE", 1), "b")], now=1)
    promoted = doc("g1-b", "g1", "MASTER", 2, since=2, in_sync=())
    promoted["ha"]["events"] = [{"kind": "master", "time": 2, "epoch": 2, "detail":
                                 "epoch 2, log at 900; failover: g1-a lost its ZooKeeper "
                                 "session"}]
    s2 = build_state([sample(doc("g1-a", "g1", "NONE", 2), "a"), sample(promoted, "b")],
                     prev=s1, now=3)
    text = next(e.text for e in s2.events if e.text.startswith("failover"))
    assert text == ("failover: master of g1 at epoch 2 (was SLAVE): failover: g1-a lost its "
                    "ZooKeeper session; g1-a still answers here: cut off from ZooKeeper, "
                    "not dead")


def test_the_master_of_a_group_the_fuse_isolates_reads_isolated_its_slave_does_not():
    from broker_core.observe.stats_doc import ProducerStats
    from console.data.state import ProducerSample

    fuse = {"cap": 1, "excluded": ["g1"], "overflow": [],
            "isolated": [{"broker": "g1", "reason": "slow", "left_s": 30}]}
    producer = ProducerSample("p", ProducerStats.from_dict({"producer": "demo", "fuse": fuse}))
    s = build_state([sample(doc("g1-a", "g1", "MASTER", 1), "a"),
                     sample(doc("g1-b", "g1", "SLAVE", 1), "b"),
                     sample(doc("g2-a", "g2", "MASTER", 1), "c")], [producer], now=1)
    assert [(b.name, b.state) for b in s.brokers] == [
        ("g1-a", "ISOLATED"), ("g1-b", "UP"), ("g2-a", "UP")]
    assert s.brokers[0].reason == "fuse of demo: slow"


def test_a_slaves_consumer_lag_is_its_masters_copy_shown_only_while_the_master_is_away():
    """The slave's offsets are its master's, a second old, against its own end: 627
    beside the master's 99 read as a slave falling behind. Consumers read from the slave
    only while its master does not answer; then its lag is the one."""
    def with_lag(d, lag):
        return {**d, "consumer_lag": {"billing": lag}}

    master = with_lag(doc("g1-a", "g1", "MASTER", 1), 99)
    slave = with_lag(doc("g1-b", "g1", "SLAVE", 1), 627)
    s1 = build_state([sample(master, "a"), sample(slave, "b")], now=1)
    assert [b.consumer_lag for b in s1.brokers] == [99, None]
    s2 = build_state([BrokerSample("a", "g1-a", None, "refused"), sample(slave, "b")],
                     prev=s1, now=2, down_after=1)
    assert [b.consumer_lag for b in s2.brokers] == [99, 627]  # the master's, from its last poll


def raft(name, role, in_sync=("r1",)):
    d = doc(name, "g1", role, 5, in_sync=in_sync, replication="raft")
    d["ha"]["members"] = 3
    return d


def test_a_raft_group_is_judged_by_its_majority_not_by_one_slave():
    ok = build_state([sample(raft("r0", "MASTER"), "a"), sample(raft("r1", "SLAVE"), "b"),
                      BrokerSample("c", "r2", None, "refused")], now=5)
    assert not {al.key for al in ok.active_alerts} & {"no-majority:g1", "no-slave:g1"}
    alone = build_state([sample(raft("r0", "MASTER", in_sync=()), "a"),
                         sample(raft("r1", "SLAVE"), "b")], now=5)
    warn = next(al for al in alone.active_alerts if al.key == "no-majority:g1")
    assert warn.severity == "critical" and "1 of 3 members" in warn.text
    assert "no-slave:g1" not in {al.key for al in alone.active_alerts}
    lost = build_state([sample(raft("r1", "NONE"), "b"),
                        BrokerSample("a", "r0", None, "refused"),
                        BrokerSample("c", "r2", None, "refused")], now=5)
    text = next(al.text for al in lost.active_alerts if al.key == "no-master:g1")
    assert text == "g1 has no leader (r1 candidate): 1 of 3 raft members up, a leader needs 2"
    late = raft("r0", "MASTER")
    late["ha"]["slaves"][0]["lag_s"] = 3.1
    behind = build_state([sample(late, "a"), sample(raft("r1", "SLAVE"), "b")], now=5)
    assert next(al.text for al in behind.active_alerts
                if al.key == "repl-lag:r0") == "r0: a follower is 3.1 s behind"
    row = [c.cell(ok.brokers[0], ok.sla).plain for c in columns_for(ok.brokers)]
    assert row[3] == "leader t5"


def test_a_leader_that_stepped_aside_for_the_fuse_is_named_with_why_in_the_alert():
    new = raft("r1", "MASTER")
    new["ha"].update(epoch=6, since=3.0)
    old = raft("r0", "SLAVE")
    old["ha"]["epoch"] = 6
    old["ha"]["events"] = [{"kind": "step-aside", "time": 2.5, "epoch": 5, "detail":
                            "to r1: a producer's fuse isolated it (slow: a call of 130 ms)"}]
    s = build_state([sample(old, "a"), sample(new, "b")], now=5)
    text = next(al.text for al in s.active_alerts if al.key == "failover:g1")
    assert text.startswith("g1's leader moved: r1 leads at term 6 since ")
    assert text.endswith("; r0 stepped aside: a producer's fuse isolated it (slow: a call "
                         "of 130 ms)")
    plain = build_state([sample(raft("r0", "SLAVE"), "a"), sample(new, "b")], now=5)
    assert "stepped aside" not in next(al.text for al in plain.active_alerts
                                       if al.key == "failover:g1")
