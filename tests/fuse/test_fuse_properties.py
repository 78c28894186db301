"""Property tests: for any reports and clock moves the cap and rule 4 hold,
and isolation ends on time in virtual time."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from fuse import Fuse
from tests.clock import ManualClock

BROKER = st.integers(min_value=0, max_value=11)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("error"), BROKER),
        st.tuples(st.just("report"), BROKER, st.floats(min_value=0.0, max_value=0.5)),
        st.tuples(st.just("advance"), st.floats(min_value=0.0, max_value=90.0)),
        st.tuples(st.just("begin"), BROKER),
        st.tuples(st.just("end"), st.integers(min_value=0, max_value=50), st.booleans()),
        st.tuples(st.just("add"), BROKER),
        st.tuples(st.just("remove"), BROKER),
        st.tuples(st.just("choose"), st.integers(min_value=1, max_value=5)),
    ),
    max_size=60,
)


def check_invariants(fuse: Fuse, clock: ManualClock) -> None:
    snap = fuse.snapshot()
    n = len(snap.brokers)
    assert snap.cap == math.floor(0.3 * n + 1e-9)
    excluded = snap.would_exclude if snap.dry_run else snap.excluded
    if snap.dry_run:
        assert snap.excluded == frozenset()
    assert len(excluded) <= snap.cap
    since = [e.since for e in snap.isolated]
    assert since == sorted(since)
    spill = max(0, len(snap.isolated) - snap.cap)
    # rule 4: the overflow brokers are exactly the earliest isolated beyond the cap
    assert snap.overflow == {e.broker for e in snap.isolated[:spill]}
    assert excluded == {e.broker for e in snap.isolated[spill:]}
    assert all(e.overflow == (e.broker in snap.overflow) for e in snap.isolated)
    for e in snap.isolated:  # ends on time: nothing outlives its deadline
        assert clock.t < e.until <= clock.t + 60.0 * 1.1 + 1e-9
        assert e.broker in snap.brokers


@settings(max_examples=300, deadline=None)
@given(OPS, st.integers(min_value=0, max_value=2**32), st.booleans())
def test_cap_and_overflow_hold_for_any_sequence(ops, seed, dry_run):
    clock = ManualClock(1000.0)
    fuse = Fuse([f"b{i}" for i in range(10)], clock=clock, seed=seed, dry_run=dry_run,
                warmup_calls=0, warmup_s=0)
    tokens = []
    for op in ops:
        kind = op[0]
        if kind == "error":
            fuse.report(f"b{op[1]}", 0.001, ok=False)
        elif kind == "report":
            fuse.report(f"b{op[1]}", op[2], ok=True)
        elif kind == "advance":
            clock.t += op[1]
        elif kind == "begin":
            tokens.append(fuse.begin(f"b{op[1]}"))
        elif kind == "end" and tokens:
            fuse.end(tokens.pop(op[1] % len(tokens)), ok=op[2])
        elif kind == "add":
            fuse.add_broker(f"b{op[1]}")
        elif kind == "remove":
            fuse.remove_broker(f"b{op[1]}")
        elif kind == "choose" and fuse.brokers:
            excluded = fuse.snapshot().excluded
            for _ in range(op[1]):
                assert fuse.choose() not in excluded
        check_invariants(fuse, clock)


@settings(max_examples=200, deadline=None)
@given(
    offences=st.lists(st.tuples(st.integers(0, 9), st.floats(0.0, 120.0)), min_size=1, max_size=20),
    probe=st.floats(0.0, 400.0),
    seed=st.integers(0, 1000),
)
def test_isolation_ends_exactly_when_its_minute_is_over(offences, probe, seed):
    clock = ManualClock(1000.0)
    start = clock.t
    fuse = Fuse([f"b{i}" for i in range(10)], clock=clock, seed=seed, warmup_calls=0, warmup_s=0,
                max_isolated_ratio=0.99)  # no cap in the way: timing only
    deadline: dict[str, float] = {}
    for broker, at in sorted(offences, key=lambda o: o[1]):
        clock.t = start + at
        name = f"b{broker}"
        if deadline.get(name, -1.0) <= clock.t:
            deadline.pop(name, None)
        fuse.report(name, 0.001, ok=False)
        until = {e.broker: e.until for e in fuse.snapshot().isolated}[name]
        assert clock.t + 60.0 <= until <= clock.t + 66.0 + 1e-9
        deadline[name] = max(deadline.get(name, 0.0), until)
    clock.t += probe  # the clock only moves forward
    isolated = {e.broker for e in fuse.snapshot().isolated}
    assert isolated == {b for b, until in deadline.items() if clock.t < until}


@settings(max_examples=50, deadline=None)
@given(OPS, st.integers(0, 100))
def test_same_inputs_same_seed_same_state(ops, seed):
    def run():
        clock = ManualClock(1000.0)
        fuse = Fuse([f"b{i}" for i in range(10)], clock=clock, seed=seed, warmup_calls=0, warmup_s=0)
        for op in ops:
            if op[0] == "error":
                fuse.report(f"b{op[1]}", 0.001, ok=False)
            elif op[0] == "advance":
                clock.t += op[1]
        return fuse.snapshot().to_dict()

    assert run() == run()
