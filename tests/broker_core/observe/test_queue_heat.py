"""Queue heat on a manual clock: rates over the last 5-10 s, the hottest first, and a
queue called hot only when far above the other queues of its topic (a busy topic
among quiet ones is not hot)."""

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


def four(topic: str) -> int:
    return 4


def test_rates_are_per_second_over_the_window_and_the_hottest_come_first():
    heat = heat_after({("a", 0): 100, ("a", 1): 300, ("b", 0): 50})
    top = heat.hottest(2, queues_of=four)
    assert [(r.topic, r.queue, r.rate) for r in top] == [("a", 1, 30.0), ("a", 0, 10.0)]
    assert top[0].times_median == 6.0  # a's queues: 30, 10, 0, 0: median 5


def test_one_queue_far_above_its_topics_others_is_hot_and_only_that_one():
    counts = {("orders", q): 100 for q in range(4)}  # 10 msgs/s each
    counts[("orders", 3)] = 1500  # 150 msgs/s: 15x its topic's median
    counts.update({("quiet", q): 10 for q in range(4)})  # another topic, 1 msg/s
    heat = heat_after(counts)
    assert [(r.topic, r.queue) for r in heat.hot(four)] == [("orders", 3)]
    report = heat.report(lambda t, q: 7, four, limit=3)
    assert report[0] == {"topic": "orders", "queue": 3, "rate": 150.0, "times_median": 15.0,
                         "depth": 7, "hot": True}
    assert not any(q["hot"] for q in report[1:])


def test_a_busy_topic_among_quiet_ones_is_not_hot_but_a_key_on_one_queue_is():
    busy = {("demo", q): 1000 for q in range(4)}  # 100 msgs/s on each of its queues
    busy.update({("batch", q): 20 for q in range(4)})
    assert heat_after(busy).hot(four) == []
    one_key = heat_after({("orders", 2): 1000})  # every message of a key, one queue
    (r,) = one_key.hot(four)
    assert (r.topic, r.queue, r.times_median) == ("orders", 2, None)  # its siblings idle


def test_no_queue_is_hot_under_the_floor_or_in_a_topic_of_one_queue():
    quiet = {("t", q): 1 for q in range(4)}
    quiet[("t", 0)] = int(HOT_MIN_RATE * 10) - 10  # far above its siblings, under the floor
    assert heat_after(quiet).hot(four) == []
    single = heat_after({("t", 0): 10_000})
    assert single.hot(lambda t: 1) == []
    assert HOT_FACTOR == 10.0


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
