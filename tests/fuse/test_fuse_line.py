"""The fuse's line on a virtual clock: a slowdown of the whole cluster raises the line
instead of isolating, an isolation is judged again when the line rises, and a broker's
first seconds and first calls are not judged slow (its errors are)."""

from __future__ import annotations

import pytest

from fuse import Fuse
from tests.clock import ManualClock
from tests.fuse.fuse_kit import make, slow


def warm(fuse: Fuse, clock: ManualClock, rt_of, seconds: float = 1.0, per_broker: int = 100) -> None:
    """Every broker answers `per_broker` calls spread over `seconds`."""
    for _ in range(per_broker):
        for b in fuse.brokers:
            fuse.report(b, rt_of(b), ok=True)
        clock.advance(seconds / per_broker)
        fuse.tick()


def test_cluster_wide_slowdown_raises_the_line_instead_of_isolating():
    fuse, clock = make(10)
    warm(fuse, clock, lambda b: 0.004)  # everyone 4 ms: baseline 4 ms, line 40 ms
    snap = fuse.snapshot()
    assert snap.baseline_s == pytest.approx(0.004, rel=0.01)
    assert snap.slow_threshold_s == pytest.approx(0.040, rel=0.01)
    slow(fuse, "b0", 0.030)  # over slow_s, not over 10x the cluster
    assert fuse.snapshot().isolated == ()
    slow(fuse, "b0", 0.060)
    assert fuse.snapshot().excluded == {"b0"}


def test_half_slow_cluster_still_isolates_up_to_the_cap():
    fuse, clock = make(10)
    warm(fuse, clock, lambda b: 0.001)
    for i in range(5):
        slow(fuse, f"b{i}", 0.030)
        clock.advance(0.01)
    snap = fuse.snapshot()
    assert len(snap.excluded) == 3 and len(snap.overflow) == 2 and not snap.cluster_slow


def test_sudden_cluster_slowdown_releases_what_it_isolated():
    fuse, clock = make(10)
    warm(fuse, clock, lambda b: 0.001)
    for i in range(7):  # 7 of 10 brokers slow within the same second: the cluster is slow
        slow(fuse, f"b{i}", 0.030)
        clock.advance(0.01)
    snap = fuse.snapshot()
    assert snap.cluster_slow and snap.excluded == frozenset() and snap.isolated == ()
    releases = [t.reason for t in snap.transitions if t.event == "release"]
    assert releases and set(releases) == {"cluster-slow"}
    fuse.report("b8", 0.001, ok=False)  # errors still isolate
    assert fuse.snapshot().excluded == {"b8"}


def test_isolation_is_rejudged_when_the_cluster_line_rises():
    fuse, clock = make(10)
    warm(fuse, clock, lambda b: 0.001)
    slow(fuse, "b0", 0.015)  # slow against a 1 ms cluster
    assert fuse.snapshot().excluded == {"b0"}
    warm(fuse, clock, lambda b: 0.004)  # then the whole cluster goes to 4 ms: line 40 ms
    snap = fuse.snapshot()
    assert snap.isolated == ()
    assert [t.reason for t in snap.transitions if t.event == "release"] == ["rejudged"]


def test_a_brokers_first_two_seconds_are_not_judged_slow():
    fuse, clock = make(10, warmup_s=2.0)
    fuse.report("b1", 0.001)
    slow(fuse, "b1", 0.050)  # a busy starting host
    assert fuse.snapshot().isolated == ()
    clock.advance(2.0)
    slow(fuse, "b1", 0.050)
    assert fuse.snapshot().excluded == {"b1"}


def test_a_brokers_first_calls_are_not_judged_slow_but_errors_are():
    fuse, _ = make(10, warmup_calls=20)
    slow(fuse, "b1", 0.050)  # a cold start: the connect, the topic's creation
    assert fuse.snapshot().isolated == ()
    for _ in range(20):
        fuse.report("b1", 0.001)
    slow(fuse, "b1", 0.050)
    assert fuse.snapshot().excluded == {"b1"}
    fuse.report("b2", 0.001, ok=False)  # an error isolates from the first call
    assert "b2" in fuse.snapshot().excluded | fuse.snapshot().overflow
