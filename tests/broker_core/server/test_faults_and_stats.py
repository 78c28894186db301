"""Fault plans and per-second recording, in virtual time."""

import pytest

from broker_core.observe.recorder import OpRecorder
from broker_core.server.faults import Faults, FaultSpec
from tests.clock import ManualClock


def test_stall_pattern_holds_writes_until_the_stall_ends():
    clock = ManualClock(1000.0)
    faults = Faults(clock, seed=1)
    faults.inject(FaultSpec(stall_ms=500, stall_every_s=5))
    assert faults.write_delay() == pytest.approx(0.5)  # start of a stall
    clock.t += 0.3
    assert faults.write_delay() == pytest.approx(0.2)
    clock.t += 0.3
    assert faults.write_delay() == 0.0  # between stalls
    clock.t = 1000.0 + 10.1
    assert faults.write_delay() == pytest.approx(0.4)  # third period


def test_random_stalls_stay_within_seed_000_range_and_duration_clears():
    clock = ManualClock(1000.0)
    faults = Faults(clock, seed=3)
    faults.inject(FaultSpec(stall_ms=2000, stall_every_s=3, stall_random=True, duration_s=30))
    seen = []
    for period in range(9):
        clock.t = 1000.0 + period * 3
        seen.append(faults.write_delay())
    assert all(0.2 <= s <= 2.0 for s in seen) and len(set(seen)) > 3
    clock.t = 1031.0
    assert faults.write_delay() == 0.0 and not faults.active


def test_error_rate_and_validation():
    faults = Faults(ManualClock(1000.0), seed=5)
    faults.inject(FaultSpec(error_rate=0.25))
    share = sum(faults.should_error() for _ in range(4000)) / 4000
    assert 0.2 < share < 0.3
    for bad in (
        FaultSpec(error_rate=2),
        FaultSpec(stall_ms=10),
        FaultSpec(latency_ms=-1),
        FaultSpec(stall_ms=6000, stall_every_s=5),
    ):
        with pytest.raises(ValueError):
            faults.inject(bad)
    # JSON from the admin endpoint: it said "'>=' not supported between 'str' and 'int'"
    for bad, words in ((FaultSpec(pause_s="x"), "pause_s must be a finite number, not 'x'"),
                       (FaultSpec(latency_ms=float("nan")), "latency_ms must be a finite"),
                       (FaultSpec(error_rate=True), "error_rate must be a finite number"),
                       (FaultSpec(stall_random="yes"), "stall_random must be true or false")):
        with pytest.raises(ValueError, match=words):
            faults.inject(bad)
    assert faults.spec == FaultSpec(error_rate=0.25)  # none of them took: the plan stands


def test_recorder_rolls_seconds_and_counts_sla_exactly():
    clock = ManualClock(100.2)
    rec = OpRecorder(("send",), clock)
    rec.record("send", 0.001, nbytes=10)
    rec.record("send", 0.0201)
    rec.record("send", 0.020)  # exactly 20 ms is within the SLA
    assert rec.roll() == []
    clock.t = 101.0
    closed = rec.roll()
    assert [c.ts for c in closed] == [100]
    fig = closed[0].ops["send"]
    assert fig.hist.count == 3 and fig.over_sla == 1 and fig.bytes == 10
    clock.t = 104.5
    assert [c.ts for c in rec.roll()] == [101, 102, 103]
    assert rec.window("send", 10).hist.count == 3
    assert rec.total["send"].count == 3 and rec.over_sla_total["send"] == 1
    # stopping: the second under way is closed as it stands (the metrics log keeps it)
    rec.record("send", 0.5)
    final = rec.roll(final=True)
    assert [c.ts for c in final] == [104] and final[0].ops["send"].hist.count == 1
    assert rec.roll() == []
