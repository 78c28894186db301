"""What a demo run proves, computed purely from its record (no cluster)."""

from __future__ import annotations

from dataclasses import dataclass

from console.demo.script import FaultAction
from console.demo.summary import health_goals, stall_detection, summarize_run


@dataclass
class View:
    name: str
    state: str = "UP"
    p99: float | None = 0.0002
    max: float | None = 0.004


ACTIONS = [FaultAction(100.0, "broker-2", "stall_ms=800.0", "stall"),
           FaultAction(130.0, "broker-2", "clear", "clear"),
           FaultAction(139.0, "broker-4", "error_rate=0.2", "errors"),
           FaultAction(250.0, "broker-2", "stall_ms=800.0", "stall")]


def t(time: float, broker: str, event: str, reason: str = "slow") -> dict:
    return {"time": time, "broker": broker, "event": event, "reason": reason}


def test_each_stall_is_matched_to_the_next_isolation_of_its_broker():
    transitions = [t(100.02, "broker-2", "isolate"), t(139.01, "broker-4", "isolate", "error"),
                   t(139.01, "broker-2", "overflow", "cap"), t(165.0, "broker-2", "release",
                                                               "expired"),
                   t(251.5, "broker-2", "isolate")]
    got = stall_detection(ACTIONS, transitions, now=300.0)
    assert [round(d["delay_s"], 2) for d in got] == [0.02, 1.5]
    assert [d["within_goal"] for d in got] == [True, False]


def test_a_stall_on_a_broker_still_isolated_counts_at_once_and_a_missed_one_is_none():
    held = [t(90.0, "broker-2", "isolate")]  # isolated before its stall began
    assert stall_detection(ACTIONS[:1], held, now=300.0)[0]["delay_s"] == 0.0
    missed = stall_detection(ACTIONS[:1], [], now=300.0)[0]
    assert missed["isolated_at"] is None and not missed["within_goal"] and not missed["open"]
    just_now = stall_detection(ACTIONS[:1], [], now=100.5)[0]
    assert just_now["open"]  # the run ended before the goal's second was up


def test_isolations_of_brokers_without_a_fault_are_false():
    fuse = {"isolations_by_broker": {"broker-2": 1, "broker-4": 1, "broker-5": 2},
            "excused_total": {"client-late": 7}, "client": {"beats": 10}}
    out = summarize_run([View(f"broker-{i}") for i in range(1, 7)], ACTIONS, [], fuse, 300.0)
    rows = {r["name"]: r for r in out["brokers"]}
    assert rows["broker-2"]["faults"] == ["stall"] and rows["broker-4"]["faults"] == ["errors"]
    assert not rows["broker-5"]["faulted"] and rows["broker-5"]["isolations"] == 2
    assert out["false_isolations"] == 2
    assert out["excused"] == {"client-late": 7} and out["client_lateness"] == {"beats": 10}


def test_an_isolation_after_a_brokers_fault_cleared_is_false_too():
    transitions = [t(100.05, "broker-2", "isolate"), t(200.0, "broker-2", "isolate"),
                   t(139.01, "broker-4", "isolate", "error"), t(145.0, "broker-1", "isolate")]
    fuse = {"isolations_by_broker": {"broker-2": 2, "broker-4": 1, "broker-1": 1}}
    out = summarize_run([View(f"broker-{i}") for i in range(1, 7)], ACTIONS, transitions,
                        fuse, 300.0)
    # broker-2's stall cleared at 130 s (+1 s grace): its isolation at 200 s is false,
    # broker-4's errors never cleared, broker-1 never had a fault
    assert out["false_isolations"] == 2
    assert [(e["broker"], e["time"]) for e in out["false_isolation_events"]] == [
        ("broker-2", 200.0), ("broker-1", 145.0)]


@dataclass
class GroupView(View):
    group: str | None = None
    role: str | None = None


def test_a_groups_fault_is_its_masters_and_the_groups_isolations_show_on_the_master():
    actions = [FaultAction(100.0, "group-2", "stall_ms=800.0 on master group-2-a", "stall",
                           "group-2-a")]
    fuse = {"isolations_by_broker": {"group-2": 1}}
    views = [GroupView("group-2-a", group="group-2", role="MASTER"),
             GroupView("group-2-b", group="group-2", role="SLAVE"),
             GroupView("group-1-a", group="group-1", role="MASTER")]
    out = summarize_run(views, actions, [t(100.2, "group-2", "isolate")], fuse, 300.0)
    rows = {r["name"]: r for r in out["brokers"]}
    assert rows["group-2-a"]["faulted"] and rows["group-2-a"]["faults"] == ["stall"]
    assert rows["group-2-a"]["isolations"] == 1
    assert not rows["group-2-b"]["faulted"] and rows["group-2-b"]["isolations"] == 0
    assert not rows["group-1-a"]["faulted"] and out["false_isolations"] == 0


def a_run(**changes) -> dict:
    """A headless summary that meets every health goal, with `changes` applied."""
    run = {"target_rate": 5000.0, "achieved_rate": 4999.0, "false_isolations": 0,
           "brokers": [
               {"name": "group-1-a", "state": "UP", "p99_s": 0.002, "max_s": 0.009,
                "faulted": False},
               {"name": "group-1-b", "state": "UP", "p99_s": None, "max_s": None,
                "faulted": False},  # a slave: no sends of its own
               {"name": "group-2-a", "state": "ISOLATED", "p99_s": 0.3, "max_s": 0.8,
                "faulted": True}],  # the stalled one: not judged by the masters' goal
           "client_lateness": {"beats": 10_000, "late_beats": 12},
           "stall_detection": [{"broker": "group-2", "within_goal": True}],
           "consumer_delay": {"billing": {"p99_s": 0.0042},
                              "warehouse": {"p99_s": 29.0}}}  # (falls behind by script)
    run.update(changes)
    return run


def verdicts(run: dict) -> list[bool | None]:
    return [met for _words, met in health_goals(run)]


def test_a_run_that_keeps_every_health_goal_meets_them_all():
    goals = health_goals(a_run())
    assert [met for _w, met in goals] == [True] * 6
    assert "billing's send -> in hand p99 4.20 ms (<= 5.00 ms)" in [w for w, _m in goals]


def test_each_goal_missed_is_named_and_only_that_one():
    slow = a_run()
    slow["brokers"][0]["max_s"] = 0.021  # one send over the Double-11 SLA's 20 ms
    assert verdicts(slow) == [True, False, True, True, True, True]
    assert verdicts(a_run(consumer_delay={"billing": {"p99_s": 0.0051}})) == [True] * 5 + [False]
    assert verdicts(a_run(achieved_rate=4700.0)) == [False] + [True] * 5
    assert verdicts(a_run(false_isolations=1)) == [True] * 3 + [False] + [True] * 2
    assert verdicts(a_run(client_lateness={"beats": 100, "late_beats": 11}))[4] is False
    assert verdicts(a_run(stall_detection=[{"within_goal": False}]))[2] is False
    down = a_run()
    down["brokers"][0]["state"] = "SLOW"
    assert verdicts(down)[1] is False


def test_a_goal_the_run_holds_nothing_for_is_not_judged():
    run = a_run(stall_detection=[], consumer_delay={}, client_lateness=None)
    assert verdicts(run) == [True, True, None, True, None, None]
