"""Consumer backlog verdicts on recorded offset series (observe.backlog)."""

import pytest

from broker_core.observe.backlog import BacklogEvaluator, Sample, drain_time, judge
from tests.clock import ManualClock


def series(committed, end, t0=0.0, dt=1.0):
    return [Sample(t0 + i * dt, c, e) for i, (c, e) in enumerate(zip(committed, end, strict=True))]


def test_a_group_keeping_up_is_ok_even_with_some_lag():
    s = series([100, 200, 300, 400, 500], [130, 230, 320, 430, 520])
    v = judge(s, alive=True)
    assert v.status == "OK" and v.lag == 20
    assert v.consume_per_s == pytest.approx(100) and v.produce_per_s == pytest.approx(97.5)


def test_growing_lag_while_moving_is_a_warning_with_no_drain_time():
    s = series([0, 50, 100, 150, 200, 250], [100, 200, 300, 400, 500, 600])
    v = judge(s, alive=True)
    assert v.status == "WARNING" and v.trend_per_s == pytest.approx(50)
    assert v.drain_s is None


def test_lag_that_grows_with_a_dip_is_not_a_warning():
    s = series([0, 50, 100, 190, 200, 250], [100, 200, 300, 380, 500, 600])
    assert judge(s, alive=True).status == "OK"  # lags 100 150 200 190 300 350
    assert judge(s[:4], alive=True).status == "OK"  # too few samples for a trend


def test_a_blip_after_keeping_up_or_on_a_steady_lag_is_not_a_warning():
    # a group keeping up at 40 msgs/s: lag 0 at each sample, then 2 in flight at the last
    s = series([40 * i for i in range(9)] + [358], [40 * i for i in range(10)])
    assert judge(s, alive=True).status == "OK"
    # a steady 3 in flight that ticks up once
    s = series([100 * i for i in range(10)], [100 * i + 3 for i in range(9)] + [904])
    assert judge(s, alive=True).status == "OK"
    # behind since 5 samples ago, after keeping up: a warning without waiting for the window
    s = series([10 * i for i in range(5)] + [40 + 8 * i for i in range(1, 6)],
               [10 * i for i in range(10)])  # lags 0 0 0 0 0 2 4 6 8 10
    assert judge(s, alive=True).status == "WARNING"
    # falling behind by half a message a second: up in 3 of 7 intervals
    s = series([40 * i for i in range(8)], [40 * i + 1 + i // 2 for i in range(8)])
    assert judge(s, alive=True).status == "WARNING"  # lags 1 1 2 2 3 3 4 4


def test_a_sawtooth_is_ok_and_drain_time_is_lag_over_the_net_rate():
    s = series([0, 90, 90, 300, 300, 500], [200, 300, 400, 500, 600, 700])
    v = judge(s, alive=True)
    assert v.status == "OK" and v.lag == 200
    assert v.drain_s is None  # consumes exactly as fast as producers write: never drains
    s = series([0, 150, 300, 450, 600], [600, 700, 800, 900, 1000])
    v = judge(s, alive=True)
    assert v.status == "OK" and v.drain_s == pytest.approx(400 / (150 - 100))


def test_stuck_offsets_with_lag_are_stalled_within_two_polls():
    moving = [0, 100, 200, 300]
    ends = [100, 200, 300, 400, 500, 600]
    # the group stops at offset 300 after the 4th sample
    s = series(moving + [300, 300], ends)
    assert judge(s[:5], alive=True).status != "STALLED"  # one poll without movement
    assert judge(s, alive=True).status == "STALLED"  # the second poll


def test_traffic_resuming_on_an_idle_queue_is_not_a_stall_until_it_waits_two_polls():
    # nothing to consume for two samples, then messages arrive (a broker the fuse lets
    # back into routing): the offset has not moved, but there was nothing to move for
    s = series([180, 180, 180], [180, 180, 192])
    assert judge(s, alive=True).status == "OK"
    s = series([180] * 4, [180, 180, 192, 200])
    assert judge(s, alive=True).status == "OK"  # waited one poll
    s = series([180] * 5, [180, 180, 192, 200, 210])
    assert judge(s, alive=True).status == "STALLED"  # messages waited two polls, unread


def test_no_lag_is_ok_even_when_offsets_do_not_move():
    s = series([500] * 6, [500] * 6)
    assert judge(s, alive=True).status == "OK"
    assert judge(s, alive=False).status == "OK"


def test_a_group_not_heard_from_with_lag_is_stopped():
    s = series([100, 100, 100], [150, 160, 170])
    assert judge(s, alive=False).status == "STOPPED"


def test_drain_time_edge_cases():
    assert drain_time(0, 0, 10) == 0.0
    assert drain_time(100, 10, 20) is None
    assert drain_time(100, 30, 10) == pytest.approx(5.0)
    # what a group consumes within a second is in flight: it is keeping up (the demo's
    # warehouse read "drains in 2m50s" for 284 behind at 997/s out, 995/s in)
    assert drain_time(284, 997.0, 995.3) is None
    assert drain_time(5000, 1000, 500) == pytest.approx(10.0)


def test_evaluator_samples_per_queue_and_reports_the_worst_queue_per_group():
    clock = ManualClock(0.0)
    ev = BacklogEvaluator(clock, window=10, stall_polls=2, stopped_after_s=10.0)
    ends = {("t", 0): 0, ("t", 1): 0}
    committed = {("billing", "t", 0): 0, ("billing", "t", 1): 0, ("warehouse", "t", 0): 0}
    for step in range(1, 7):
        clock.advance(1.0)
        ends = {k: v + 100 for k, v in ends.items()}
        committed[("billing", "t", 0)] = ends[("t", 0)]
        committed[("billing", "t", 1)] = ends[("t", 1)]
        if step <= 3:
            committed[("warehouse", "t", 0)] = ends[("t", 0)] - 10
        ev.heard("billing")
        ev.heard("warehouse")
        ev.sample(committed, lambda topic, q, ends=ends: ends[(topic, q)])
    report = ev.report()
    assert report["billing"]["status"] == "OK" and report["billing"]["lag"] == 0
    w = report["warehouse"]
    assert w["status"] == "STALLED" and w["lag"] == 310
    assert w["queues"] == [{"topic": "t", "queue": 0, "committed": 290, "end": 600, "lag": 310,
                            "status": "STALLED", "drain_s": None}]
    # its consumers go away: nothing heard for the stopped threshold
    for _ in range(11):
        clock.advance(1.0)
        ev.heard("billing")
        ev.sample(committed, lambda topic, q, ends=ends: ends[(topic, q)])
    assert ev.report()["warehouse"]["status"] == "STOPPED"
    assert ev.report()["warehouse"]["idle_s"] == pytest.approx(11.0)


def test_a_slow_group_visiting_its_queues_in_turn_is_a_warning_not_a_stall():
    clock = ManualClock(0.0)
    ev = BacklogEvaluator(clock, window=10, stall_polls=2)
    committed = {("slow", "t", q): 0 for q in range(3)}
    ends = {("t", q): 0 for q in range(3)}
    for step in range(8):
        clock.advance(1.0)
        ends = {k: v + 100 for k, v in ends.items()}  # 300 msgs/s written
        committed[("slow", "t", step % 3)] += 150  # 150 consumed, one queue at a time
        ev.heard("slow")
        ev.sample(committed, lambda topic, q, ends=ends: ends[(topic, q)])
    g = ev.report()["slow"]
    assert g["status"] == "WARNING" and g["drain_s"] is None
    assert "STALLED" in {q["status"] for q in g["queues"]}  # a queue left for 3 polls
    assert g["consume_per_s"] == pytest.approx(150) and g["produce_per_s"] == pytest.approx(300)


def test_a_group_on_thousands_of_queues_lists_those_behind_worst_first_and_counts_all():
    from broker_core.observe.backlog import MAX_QUEUE_ROWS

    clock = ManualClock(0.0)
    ev = BacklogEvaluator(clock, window=10)
    n = 5_000
    committed = {("g", "t", q): 100 for q in range(n)}
    ends = {("t", q): 100 + (q % 7 == 0) * q for q in range(n)}  # every 7th queue behind
    for _ in range(3):
        clock.advance(1.0)
        ev.heard("g")
        ev.sample(committed, lambda t, q: ends[(t, q)])
    g = ev.report()["g"]
    assert g["queue_count"] == n and g["lag"] == sum(e - 100 for e in ends.values())
    assert len(g["queues"]) == MAX_QUEUE_ROWS  # 715 behind, the worst listed
    lags = [q["lag"] for q in g["queues"]]
    assert all(q["status"] == "STALLED" for q in g["queues"])  # alive, offsets still
    assert lags == sorted(lags, reverse=True) and lags[0] == 4998
    assert all(q["lag"] > 0 for q in g["queues"])  # caught-up queues are not listed


def test_a_sample_in_steps_is_the_whole_sample_and_ignores_commits_made_between_steps():
    """The tick samples 10,000 queues in steps with the loop serving between them: the
    result is the one-pass sample's, and a commit meanwhile waits for the next sample."""
    clock = ManualClock(0.0)
    whole, stepped = BacklogEvaluator(clock), BacklogEvaluator(clock)
    committed = {(g, "t", q): q for g in ("a", "b") for q in range(50)}
    ends = {("t", q): 2 * q for q in range(50)}
    for offset in range(3):
        clock.advance(1.0)
        committed = {k: v + offset for k, v in committed.items()}
        whole.sample(committed, lambda t, q: ends[(t, q)])
        mine = dict(committed)
        steps = 0
        for _ in stepped.sample_steps(mine, lambda t, q: ends[(t, q)], step=7):
            steps += 1
            mine[("c", "t", steps)] = 0  # a new group's commit between two steps
        assert steps == len(committed) // 7
    assert stepped.report() == whole.report() and stepped.lag() == whole.lag()
    assert "c" not in stepped.lag()


def test_the_samples_of_ten_thousand_queues_are_not_walked_by_the_collector():
    """A queue's samples are tuples of numbers, which the collector stops tracking:
    held as named tuples, 100,000 of them made each full collection hold the broker's
    loop 30-80 ms."""
    import gc

    clock = ManualClock(0.0)
    ev = BacklogEvaluator(clock, window=10)
    committed = {("g", "t", q): q for q in range(2_000)}
    for _ in range(10):
        clock.advance(1.0)
        ev.sample(committed, lambda t, q: q + 1)
    gc.collect()
    held = [s for window in ev._samples.values() for s in window]
    assert len(held) == 20_000 and not any(gc.is_tracked(s) for s in held)
    assert ev.report()["g"]["lag"] == 2_000  # and judged as before


def test_an_offset_reset_is_not_a_negative_consume_rate():
    # the committed offset moves back 3,000 (an offset reset) in the window: the net move
    # read "out -291/s"; the reset's interval is left out, the rest is consumption
    s = series([5000, 5100, 5200, 2200, 2300, 2400], [5000, 5100, 5200, 5300, 5400, 5500])
    v = judge(s, alive=True)
    assert v.consume_per_s == pytest.approx(100)  # 400 consumed over the 4 s that were not a reset
    assert v.lag == 3100 and v.trend_per_s > 0 and v.drain_s is None  # not catching up yet
    # nothing but a reset in the window: the rate is not known, 0, not negative
    v = judge(series([5000, 2000], [5000, 5000]), alive=True)
    assert v.consume_per_s == 0.0 and v.lag == 3000
