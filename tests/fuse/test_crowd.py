"""Slow alone or not at all: the crowd of calls, host contention and stuck calls.

Timelines on a virtual clock, with the client beating on time (its own
lateness is `test_lateness.py`'s subject): what differs is what the brokers do.
"""

from __future__ import annotations

import pytest

from fuse import Fuse
from fuse.crowd import BUCKET_S, CrowdWindow
from tests.clock import ManualClock

BEAT = 0.005


def cluster(n: int = 6) -> tuple[Fuse, ManualClock]:
    clock = ManualClock()
    fuse = Fuse([f"b{i}" for i in range(n)], clock=clock, seed=1, warmup_calls=0, warmup_s=0)
    return fuse, clock


def steady(fuse: Fuse, clock: ManualClock, seconds: float, rt: float = 0.0005,
           slow: dict[str, float] | None = None, pending: list | None = None) -> list:
    """Each ms a call to every broker, answered `rt` (or `slow[b]`) later; the
    client beats every 5 ms on time. Returns the calls still in flight."""
    slow = slow or {}
    pending = pending if pending is not None else []  # (due, token)
    end, next_beat = clock.t + seconds, clock.t
    while clock.t < end:
        for b in fuse.brokers:
            pending.append((clock.t + slow.get(b, rt), fuse.begin(b)))
        clock.t += 0.001
        pending.sort(key=lambda p: p[0])
        while pending and pending[0][0] <= clock.t:
            fuse.end(pending.pop(0)[1], ok=True)
        if clock.t >= next_beat:
            fuse.heartbeat(BEAT)
            next_beat = clock.t + BEAT
        fuse.tick()
    return pending


# --- the window alone --------------------------------------------------------------


def test_window_counts_answers_and_folds_a_usual_share():
    crowd = CrowdWindow()
    t = 10.0
    for i in range(8000):  # 8 s (4 time constants) at 2 answers per ms, 1 in 20 sluggish
        crowd.add(t, 2, 1 if i % 10 == 0 else 0)
        t += 0.001
        crowd.fold(t)
    assert crowd.usual_share == pytest.approx(0.05, abs=0.01)
    answers, sluggish = crowd.share(t - 0.1, t)
    assert answers == pytest.approx(200, abs=4) and sluggish == pytest.approx(10, abs=2)
    assert crowd.judge(t - 0.1, t, 0.15, 3.0) == "calm"
    for _ in range(6):  # then 30 sluggish answers within 6 ms
        crowd.add(t, 5, 5)
        t += BUCKET_S / 2
    assert crowd.judge(t - 0.02, t, 0.15, 3.0) == "surged"


def test_few_answers_or_a_healthy_tail_are_calm():
    crowd = CrowdWindow()
    crowd.add(1.0, 2, 2)
    assert crowd.judge(0.9, 1.0, 0.15, 3.0) == "calm"  # under 8 answers
    crowd.add(1.0, 40, 0)
    assert crowd.judge(0.9, 1.0, 0.15, 3.0) == "calm"  # two sluggish: a healthy tail
    crowd.add(1.0, 1, 1)  # 3 of 43 sluggish, usual share 0: stirring
    assert crowd.judge(0.9, 1.0, 0.15, 3.0) == "stirring"
    assert crowd.judge(0.9, 1.0, 0.15, 3.0, waiting=10) == "surged"


# --- through the fuse ------------------------------------------------------------------


def test_host_contention_slowing_most_brokers_isolates_nobody():
    fuse, clock = cluster(6)
    pending = steady(fuse, clock, 2.0)
    # the shared host is short of CPU for 30 ms: every broker answers 3-14 ms late
    pending = steady(fuse, clock, 0.030, pending=pending,
                     slow={"b0": 0.014, "b1": 0.012, "b2": 0.004, "b3": 0.006, "b4": 0.013,
                           "b5": 0.005})
    steady(fuse, clock, 0.5, pending=pending)
    snap = fuse.snapshot()
    assert snap.isolated == () and snap.transitions_total["isolate"] == 0
    assert snap.excused_total["aged-together"] > 0


def test_a_stalled_broker_in_a_calm_crowd_is_isolated_at_once():
    fuse, clock = cluster(6)
    pending = steady(fuse, clock, 2.0)
    stuck = fuse.begin("b3")  # b3 stops answering; the others go on
    steady(fuse, clock, 0.025, pending=pending)
    assert fuse.snapshot().excluded == {"b3"}
    fuse.end(stuck, ok=True)


def test_a_broker_always_slow_is_still_judged_against_the_usual_crowd():
    fuse, clock = cluster(10)
    # half the cluster slow for seconds: the usual share holds their tail
    slow = {f"b{i}": 0.025 for i in range(5)}
    steady(fuse, clock, 6.0, slow=slow)
    snap = fuse.snapshot()
    assert len(snap.excluded) == snap.cap == 3
    assert snap.excluded <= set(slow)


def test_a_stuck_call_is_shared_when_the_others_waited_a_quarter_as_long():
    fuse, clock = cluster(10)
    pending = steady(fuse, clock, 2.0)
    # six of ten brokers hang 60 ms together (a switch next to the client drops
    # their traffic): not more than 60 % in a second, so the cluster-slow rule
    # stays silent; each stuck call is weighed against the others that aged
    hung = [fuse.begin(f"b{i}") for i in range(6)]
    healthy = {f"b{i}": 0.0005 for i in range(6, 10)}
    for _ in range(60):
        for b, rt in healthy.items():
            pending.append((clock.t + rt, fuse.begin(b)))
        clock.t += 0.001
        pending.sort(key=lambda p: p[0])
        while pending and pending[0][0] <= clock.t:
            fuse.end(pending.pop(0)[1], ok=True)
        fuse.heartbeat(BEAT)
        fuse.tick()
    for token in hung:
        fuse.end(token, ok=True)
    snap = fuse.snapshot()
    assert snap.isolated == ()
    assert snap.excused_total["aged-together"] > 0


@pytest.mark.parametrize("stall_s", [0.06, 0.25])
def test_in_a_cluster_of_two_a_host_slowing_both_brokers_isolates_neither(stall_s):
    # two raft groups on one host (the raft chaos run): a member restarting took a core
    # and both leaders answered 60-290 ms late together. With one other broker to weigh,
    # "most others aged" needed two: both were isolated, one after the other
    fuse, clock = cluster(2)
    pending = steady(fuse, clock, 2.0, rt=0.002)
    pending = steady(fuse, clock, 0.010, pending=pending, slow={"b0": stall_s, "b1": stall_s})
    steady(fuse, clock, 1.0, rt=0.002, pending=pending)
    snap = fuse.snapshot()
    assert snap.transitions_total["isolate"] == 0 and snap.isolated == ()
    assert snap.excused_total["aged-together"] > 0


@pytest.mark.parametrize("stall_s", [0.06, 0.25])
def test_in_a_cluster_of_two_a_broker_slow_alone_is_still_isolated(stall_s):
    fuse, clock = cluster(2)
    pending = steady(fuse, clock, 2.0, rt=0.002)
    pending = steady(fuse, clock, 0.010, pending=pending, slow={"b0": stall_s})
    steady(fuse, clock, 1.0, rt=0.002, pending=pending)
    snap = fuse.snapshot()
    assert snap.transitions_total["isolate"] == 1
    assert [b.broker for b in snap.isolated] == ["b0"]  # (serving: the cap of two is 0)


def test_a_lone_broker_slow_is_isolated_with_no_other_to_excuse_it():
    fuse, clock = cluster(1)  # (no other broker aged: none to call its slowness shared)
    pending = steady(fuse, clock, 2.0, rt=0.002)
    pending = steady(fuse, clock, 0.010, pending=pending, slow={"b0": 0.25})
    steady(fuse, clock, 1.0, rt=0.002, pending=pending)
    assert fuse.snapshot().transitions_total["isolate"] == 1


def test_a_broker_on_the_clients_host_is_isolated_only_once_a_call_hangs():
    clock = ManualClock()
    fuse = Fuse([f"b{i}" for i in range(6)], clock=clock, seed=1, warmup_calls=0, warmup_s=0,
                colocated=[f"b{i}" for i in range(6)])
    pending = steady(fuse, clock, 2.0)
    late = fuse.begin("b3")  # descheduled 60 ms by the host it shares with the client
    pending = steady(fuse, clock, 0.060, pending=pending)
    fuse.end(late, ok=True)
    assert fuse.snapshot().isolated == ()
    hung = fuse.begin("b3")  # a stall: past 10x the line
    steady(fuse, clock, 0.105, pending=pending)
    snap = fuse.snapshot()
    assert snap.excluded == {"b3"} and snap.colocated == frozenset(fuse.brokers)
    fuse.end(hung, ok=True)


def test_on_a_loaded_host_a_colocated_stall_hangs_at_the_ceiling_not_ten_lines():
    # every broker answers in 3.5 ms: the line is 35 ms, and ten lines would be 350 ms,
    # longer than many of the demo's random PageCache stalls (200-800 ms)
    clock = ManualClock()
    fuse = Fuse([f"b{i}" for i in range(6)], clock=clock, seed=1, warmup_calls=0, warmup_s=0,
                colocated=[f"b{i}" for i in range(6)])
    pending = steady(fuse, clock, 2.0, rt=0.0035)
    assert fuse.snapshot().slow_threshold_s > 0.03
    stalled = fuse.begin("b3")
    pending = steady(fuse, clock, 0.110, rt=0.0035, pending=pending)
    assert fuse.snapshot().isolated == ()  # short of the 120 ms ceiling: a hiccup still
    steady(fuse, clock, 0.015, rt=0.0035, pending=pending)
    assert fuse.snapshot().excluded == {"b3"}
    fuse.end(stalled, ok=True)


def test_late_answers_do_not_keep_a_colocated_overflow_broker_isolated():
    clock = ManualClock()
    fuse = Fuse([f"b{i}" for i in range(6)], clock=clock, seed=1, warmup_calls=0,
                warmup_s=0, isolation_s=5.0, max_isolation_s=5.0,
                colocated=[f"b{i}" for i in range(6)])
    pending = steady(fuse, clock, 2.0)
    fuse.report("b2", 0.001, ok=False)  # b2 isolated, then b4: b2 serves as overflow
    clock.t += 0.5
    fuse.report("b4", 0.001, ok=False)
    assert fuse.snapshot().overflow == {"b2"}
    for _ in range(12):  # b2 answers 30 ms late now and then: the host's noise
        late = fuse.begin("b2")
        pending = steady(fuse, clock, 0.030, pending=pending)
        fuse.end(late, ok=True)
        pending = steady(fuse, clock, 0.5, pending=pending)
    snap = fuse.snapshot()
    assert "b2" not in {i.broker for i in snap.isolated}  # its 5 s ran out
