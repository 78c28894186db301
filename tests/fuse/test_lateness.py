"""Client lateness: the fuse judges a broker on the time the client was watching.

Timelines are replayed on a virtual clock: `beat` is the client's heartbeat
timer, `begin`/`end` its calls. An asyncio client reads answers before its
late timer runs, so after a pause the answers come first, then the beat.
"""

from __future__ import annotations

import random

import pytest

from fuse import Fuse, FuseError
from fuse.lateness import KEEP_GAPS, ClientLateness
from tests.clock import ManualClock

BEAT = 0.005


def beat_for(fuse: Fuse, clock: ManualClock, seconds: float, step: float = BEAT) -> None:
    """The client runs normally for `seconds`: beats (and housekeeping) on time."""
    end = clock.t + seconds
    while clock.t + step <= end + 1e-12:
        clock.t += step
        fuse.heartbeat(BEAT)
        fuse.tick()


def cluster(n: int = 6) -> tuple[Fuse, ManualClock]:
    clock = ManualClock()
    fuse = Fuse([f"b{i}" for i in range(n)], clock=clock, seed=1, warmup_calls=0, warmup_s=0)
    fuse.heartbeat(BEAT)
    return fuse, clock


# --- the detector alone ------------------------------------------------------------


def test_on_time_beats_leave_no_gap():
    late = ClientLateness()
    for i in range(100):
        assert late.beat(i * BEAT, BEAT) == 0.0
    now = 99 * BEAT
    assert late.away(now - 0.2, now) == 0.0
    assert late.cutoff(now, 0.010) == pytest.approx(now - 0.010)
    assert late.figures(now).late_beats == 0


def test_a_late_beat_is_a_gap_that_calls_overlapping_it_do_not_pay():
    late = ClientLateness()
    late.beat(0.000, BEAT)
    late.beat(0.045, BEAT)  # due at 0.005: the client may have stopped any time after 0
    assert late.away(0.000, 0.050) == pytest.approx(0.045)
    assert late.away(0.020, 0.050) == pytest.approx(0.025)
    assert late.away(0.045, 0.050) == 0.0
    fig = late.figures(0.046)
    assert (fig.late_beats, fig.worst_s, fig.worst_recent_s) == (
        1, pytest.approx(0.040), pytest.approx(0.040))


def test_the_open_gap_counts_before_the_late_beat_lands():
    late = ClientLateness()
    late.beat(0.000, BEAT)
    assert late.away(0.001, 0.0055) == 0.0  # within the interval and tolerance: on time
    # 30 ms later the loop reads answers before its timer runs: away since its last beat
    assert late.away(0.001, 0.030) == pytest.approx(0.029)
    assert late.watched_until(0.030) == 0.0
    assert late.figures(0.030).late_now_s == pytest.approx(0.025)


def test_cutoff_skips_the_time_the_client_was_away():
    late = ClientLateness()
    t = 0.0
    while t < 0.100:
        late.beat(t, BEAT)
        t += BEAT
    late.beat(0.150, BEAT)  # last on time at 0.095; away 0.095 .. 0.150
    # at 0.155 a call must have waited 10 ms of watched time: 5 ms after the gap,
    # so 5 ms before it
    assert late.cutoff(0.155, 0.010) == pytest.approx(0.090)


# --- timelines through the fuse ---------------------------------------------------


def test_client_pause_isolates_nobody():
    fuse, clock = cluster()
    beat_for(fuse, clock, 1.0)
    tokens = [fuse.begin(f"b{i % 6}") for i in range(24)]
    clock.t += 0.045  # the client's loop is stalled 45 ms: no beat, no reading
    fuse.tick()  # e.g. an HTTP thread's snapshot meanwhile: judges only watched time
    for token in tokens:  # then the answers, read before the late beat
        fuse.end(token, ok=True)
    fuse.heartbeat(BEAT)
    beat_for(fuse, clock, 0.5)
    snap = fuse.snapshot()
    assert snap.isolated == () and sum(snap.transitions_total.values()) == 0
    assert snap.excused_total["client-late"] == 24
    assert snap.client.late_beats == 1 and snap.client.worst_s == pytest.approx(0.040)
    fuse.rest()  # nothing in flight: the beats stop, the figures stay (a paced producer
    clock.t += 5.0  # rests between its sends: its report read then showed none)
    rested = fuse.snapshot().client
    assert (rested.beats, rested.late_beats, rested.late_now_s) == (snap.client.beats, 1, 0.0)


def test_one_stalled_broker_is_isolated_in_flight():
    fuse, clock = cluster()
    beat_for(fuse, clock, 1.0)
    stuck = fuse.begin("b2")
    beat_for(fuse, clock, 0.025)  # the client runs on time; b2 does not answer
    snap = fuse.snapshot()
    assert snap.excluded == {"b2"} and snap.isolated[0].reason == "slow"
    assert snap.isolations_by_broker == {"b2": 1}
    fuse.end(stuck, ok=True)


def test_pause_and_stall_at_once_isolate_only_the_stalled_broker():
    fuse, clock = cluster()
    beat_for(fuse, clock, 1.0)
    stuck = fuse.begin("b2")
    others = [fuse.begin(f"b{i}") for i in (0, 1, 3, 4, 5)]
    clock.t += 0.040  # the client pauses 40 ms
    for token in others:
        fuse.end(token, ok=True)
    fuse.heartbeat(BEAT)
    assert fuse.snapshot().isolated == ()  # the pause is not b2's fault either
    beat_for(fuse, clock, 0.030)  # b2 still silent for 30 ms of watched time
    snap = fuse.snapshot()
    assert snap.excluded == {"b2"}
    assert snap.isolations_by_broker == {"b2": 1}
    fuse.end(stuck, ok=True)


def test_answers_judged_slow_when_the_client_was_watching():
    fuse, clock = cluster()
    beat_for(fuse, clock, 1.0)
    for _ in range(2):
        token = fuse.begin("b4")
        beat_for(fuse, clock, 0.015)  # answer after 15 ms, the client on time: b4 was slow
        fuse.end(token, ok=True)
    assert fuse.snapshot().excluded == {"b4"}


def test_the_brokers_own_service_time_is_a_floor():
    fuse, clock = cluster()
    beat_for(fuse, clock, 1.0)
    token = fuse.begin("b1")
    clock.t += 0.030  # the client was away the whole call ...
    fuse.end(token, ok=True, broker_s=0.025)  # ... but the broker says it took 25 ms
    assert fuse.snapshot().excluded == {"b1"}


def test_most_brokers_aging_together_is_the_clients_lateness_without_a_heartbeat():
    clock = ManualClock()
    fuse = Fuse([f"b{i}" for i in range(6)], clock=clock, seed=1, warmup_calls=0, warmup_s=0)  # no beat
    tokens = [fuse.begin(f"b{i}") for i in range(5)]
    clock.t += 0.025
    fuse.tick()
    snap = fuse.snapshot()
    assert snap.isolated == () and snap.transitions_total["isolate"] == 0
    assert snap.excused_total["aged-together"] >= 5
    for token in tokens:
        fuse.end(token, ok=True)


def test_heartbeat_interval_is_checked():
    fuse, _ = cluster()
    with pytest.raises(FuseError, match="interval_s"):
        fuse.heartbeat(0)
    with pytest.raises(FuseError, match="interval_s"):
        fuse.heartbeat(float("nan"))


def test_snapshot_and_metrics_carry_the_clients_lateness():
    from fuse.export import metric_families

    fuse, clock = cluster()
    beat_for(fuse, clock, 0.1)
    clock.t += 0.030
    fuse.heartbeat(BEAT)
    data = fuse.snapshot().to_dict()
    assert data["client"]["late_beats"] == 1
    assert data["client"]["worst_recent_s"] == pytest.approx(0.025)
    fams = {f.name: f for f in metric_families(fuse.snapshot())}
    assert fams["floodgate_fuse_client_lateness_seconds"].samples[0][1] == pytest.approx(0.025)
    assert "floodgate_fuse_excused_total" in fams


def _walked_cutoff(gaps: list[tuple[float, float]], t: float, need: float) -> float:
    """The cutoff by walking every gap back from t (the definition, slowly)."""
    for gap_start, gap_end in reversed(gaps):
        if gap_end >= t:
            t = min(t, gap_start)
            continue
        if t - gap_end >= need:
            return t - need
        need -= t - gap_end
        t = gap_start
    return t - need


@pytest.mark.parametrize("seed", range(20))
def test_cutoff_equals_walking_the_gaps_back(seed):
    """The bisected cutoff is the walk's, on random beats: long runs of late ones,
    lines reaching past every gap kept, and `now` read before the latest beat."""
    rng = random.Random(seed)
    late, t, gaps = ClientLateness(), 100.0, []
    for beat in range(rng.choice([5, 300, 6 * KEEP_GAPS])):  # the last: trimmed twice
        step = BEAT if rng.random() < 0.6 else BEAT + rng.uniform(0.002, 0.05)
        if late.last is not None and step - BEAT > late.tolerance_s:
            gaps.append((late.last, t + step))
        t += step
        late.beat(t, BEAT)
        if beat % 11:
            continue
        kept = gaps[-len(late._gaps):] if late._gaps else []
        for line in (0.0013, 0.0107, 0.1003, 1.0001, 100.0):  # (no ties with whole beats)
            for now in (t, t + 0.003, t + 0.2, t - 0.004):
                expected = _walked_cutoff(kept, late.watched_until(now), line)
                assert late.cutoff(now, line) == pytest.approx(expected, abs=1e-9)
    assert len(late._gaps) <= 2 * KEEP_GAPS
