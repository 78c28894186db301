"""The console writes what it sees to the cluster's events log: alert edges, brokers'
state changes and the fuse's transitions, once each, by one console; and reads it back
as it grows (the alerts screen's history)."""

from __future__ import annotations

from broker_core.observe.events import EventLog, EventTail, read_events
from console.data.alerts import Alert, AlertLog
from console.data.console_events import ConsoleEvents
from console.data.state import ClusterState, Event, ProducerView


def _fuse(*transitions):
    return ProducerView("h:1", "demo", True, fuse={"cap": 1, "transitions": list(transitions)})


ISOLATE = {"time": 12.5, "wall_time": 1000.3, "broker": "group-2", "event": "isolate",
           "reason": "slow", "detail": "a call of 300.1 ms"}
RELEASE = {"time": 72.5, "wall_time": 1060.3, "broker": "group-2", "event": "release",
           "reason": "expired"}


def test_alerts_state_changes_and_fuse_transitions_are_written_once(tmp_path):
    log = tmp_path / "events.jsonl"
    writer = ConsoleEvents(log)
    s1 = ClusterState(now=1000.0, producers=(_fuse(ISOLATE),),
                      alerts=AlertLog().update({"max:g2": Alert("max:g2", "critical", "max")},
                                               1000.0),
                      events=(Event(1000.0, "group-2-a", "start → UP"),))
    assert writer.record(None, s1) == 3
    s2 = ClusterState(now=1001.0, producers=(_fuse(ISOLATE, RELEASE),),
                      alerts=s1.alerts.update({}, 1001.0), events=s1.events)
    assert writer.record(s1, s2) == 2  # the clear and the release; nothing again
    got = [(e["time"], e["kind"], e["text"]) for e in read_events(log)]
    assert got == [
        (1000.0, "alert", "max"), (1000.0, "note", "group-2-a start → UP"),
        (1000.3, "fuse", "fuse of demo: isolate group-2 (slow): a call of 300.1 ms"),
        (1001.0, "alert", "cleared: max"),
        (1060.3, "fuse", "fuse of demo: release group-2 (expired)")]
    writer.close()
    again = ConsoleEvents(log)  # a console started later: the fuse's last 100 not again
    fresh = ClusterState(now=1002.0, producers=(_fuse(ISOLATE, RELEASE),))
    assert again.writer and again.record(None, fresh) == 0
    again.close()


def test_a_second_console_on_the_same_cluster_writes_nothing(tmp_path):
    log = tmp_path / "events.jsonl"
    first, second = ConsoleEvents(log), ConsoleEvents(log)
    assert first.writer and not second.writer
    state = ClusterState(now=5.0, alerts=AlertLog().update(
        {"down:b": Alert("down:b", "critical", "b DOWN")}, 5.0))
    assert second.record(None, state) == 0 and first.record(None, state) == 1
    assert len(read_events(log)) == 1
    first.close()
    assert ConsoleEvents(log).writer  # the lock goes with the console that held it


def test_the_tail_reads_what_was_appended_and_follows_a_roll(tmp_path):
    now = [0.0]
    log = EventLog(tmp_path, "demo", clock=lambda: now[0], max_bytes=300, keep=3)
    tail = EventTail(tmp_path, keep=10)
    assert not tail.poll()  # no log yet
    for i in range(3):
        now[0] = float(i)
        log.append("note", f"event {i}")
    assert tail.poll() and [e["text"] for e in tail.recent] == ["event 0", "event 1", "event 2"]
    assert not tail.poll()  # nothing new: nothing read
    for i in range(3, 9):  # past 300 bytes: the live file rolls under the tail
        now[0] = float(i)
        log.append("note", f"event {i}")
    assert tail.poll()
    assert [e["text"] for e in tail.recent] == [f"event {i}" for i in range(9)]
