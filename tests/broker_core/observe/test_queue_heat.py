"""Queue heat on a manual clock: rates over a closed window, the hottest first, and a
queue called hot only when far above its broker's median active queue."""

from __future__ import annotations

from broker_core.observe.queue_heat import HOT_FACTOR, HOT_MIN_RATE, QueueHeat
from tests.clock import ManualClock


def heat_after(counts: dict[tuple[str, int], int], window_s: float = 10.0) -> QueueHeat:
    clock = ManualClock()
    heat = QueueHeat(clock, window_s)
    for (topic, qid), n in counts.items():
        heat.hit(topic, qid, n)
    clock.advance(window_s)
    return heat


def test_rates_are_per_second_over_the_window_and_the_hottest_come_first():
    heat = heat_after({("a", 0): 100, ("a", 1): 300, ("b", 0): 50})
    assert [(r.topic, r.queue, r.rate) for r in heat.hottest(2)] == [("a", 1, 30.0),
                                                                      ("a", 0, 10.0)]
    assert heat.hottest(1)[0].times_median == 3.0  # the median active queue: 10 msgs/s


def test_one_queue_far_above_the_median_is_hot_and_only_that_one():
    counts = {("orders", q): 100 for q in range(8)}  # 10 msgs/s each
    counts[("orders", 3)] = int(10 * HOT_FACTOR * 10 * 1.5)  # 150 msgs/s, 15x the median
    heat = heat_after(counts)
    assert [(r.topic, r.queue) for r in heat.hot()] == [("orders", 3)]
    report = heat.report(lambda t, q: 7, limit=3)
    assert report[0] == {"topic": "orders", "queue": 3, "rate": 150.0, "times_median": 15.0,
                         "depth": 7, "hot": True}
    assert not any(q["hot"] for q in report[1:])


def test_no_queue_is_hot_on_a_quiet_broker_or_with_too_few_queues_to_judge():
    quiet = {("t", q): 1 for q in range(8)}
    quiet[("t", 0)] = int(HOT_MIN_RATE * 10) - 10  # 20x the median, but under the floor
    assert heat_after(quiet).hot() == []
    few = heat_after({("t", 0): 10_000, ("t", 1): 10, ("t", 2): 10})
    assert few.hot() == []  # three active queues: no median worth judging against


def test_rates_span_half_a_window_to_a_window_and_a_deleted_topic_is_forgotten():
    clock = ManualClock()
    heat = QueueHeat(clock, 10.0)
    heat.hit("t", 0, 5)
    clock.advance(1)
    assert heat.rates() == {("t", 0): 5.0}  # a second after it started
    clock.advance(3.9)
    assert not heat.tick()
    clock.advance(0.1)
    assert heat.tick()  # half a window: the next baseline taken (5 so far)
    heat.hit("t", 0, 5)
    clock.advance(5)
    assert heat.tick()  # the span now starts at 5 s: 5 messages over the last 5 s
    assert heat.rates() == {("t", 0): 1.0}
    clock.advance(5)
    assert heat.tick() and heat.rates() == {}  # nothing new since: not active
    heat.hit("t", 0)
    heat.forget_topic("t")
    assert heat.counts == {} and heat.rates() == {}
