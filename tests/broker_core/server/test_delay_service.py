"""Delayed messages on a manual clock, against a real store: the levels, a message
invisible in its queue until due and then there as sent, the order within a level,
delivery offsets kept across a restart (and a crash: delivered again, never lost),
a level's queue across a segment roll, and the figures an operator reads."""

from __future__ import annotations

import pytest

from broker_core.protocol.delay import (
    LABELS,
    PROP_REAL_QID,
    PROP_REAL_TOPIC,
    SCHEDULE_TOPIC,
    level_of,
    parse_level,
    with_delay,
)
from broker_core.server.delay_service import DelayOffsets, DelayService, store_due
from broker_core.store import MessageStore
from tests.clock import ManualClock


def test_the_levels_are_rocketmqs_and_nothing_else_is_taken():
    assert LABELS == ("1s", "5s", "10s", "30s", "1m", "2m", "3m", "4m", "5m", "6m", "7m",
                      "8m", "9m", "10m", "20m", "30m", "1h", "2h")
    assert (level_of(1), level_of("5s"), level_of(60.0), level_of("2h")) == (1, 2, 5, 18)
    with pytest.raises(ValueError, match="one of RocketMQ's levels: 1s 5s .* 2h .not 45"):
        level_of(45)
    with pytest.raises(ValueError, match="DELAY must be a level 1..18, not '19'"):
        parse_level("19")
    assert with_delay({"a": "b"}, "1m") == {"a": "b", "DELAY": "5"}
    assert with_delay(None, None) is None


class Harness:
    """A store on a manual clock, the service delivering into the same store."""

    def __init__(self, path, small_config, clock: ManualClock) -> None:
        self.clock = clock
        self.store = MessageStore(path, small_config(clock=clock))
        self.offsets = DelayOffsets(path.parent / f"{path.name}-delay.json")
        self.service = DelayService(self.store, self.offsets, self.deliver,
                                    lambda: int(clock() * 1000))
        self.delivered: list[tuple[str, int, bytes]] = []

    def deliver(self, topic: str, qid: int, m) -> bool:
        self.delivered.append((topic, qid, m.body))
        return store_due(self.store, topic, qid, m).status.name == "PUT_OK"

    def send_delayed(self, body: bytes, level: int, topic: str = "orders", qid: int = 2,
                     **props) -> None:
        props = {PROP_REAL_TOPIC: topic, PROP_REAL_QID: str(qid), "DELAY": str(level), **props}
        assert self.store.put(SCHEDULE_TOPIC, level - 1, body, "paid", "order-1",
                              props).status.name == "PUT_OK"


def test_a_delayed_message_is_invisible_until_due_then_there_as_sent(tmp_path, small_config):
    h = Harness(tmp_path / "s", small_config, ManualClock(1_000.0))
    h.send_delayed(b"later", level=2, PGROUP="shop")  # 5 s
    h.clock.advance(4.9)
    assert h.service.run_once() == 0
    assert h.store.queue_offsets("orders", 2) == (0, 0)
    assert h.service.figures()["pending"] == {"5s": 1}
    h.clock.advance(0.1)
    assert h.service.run_once() == 1
    (m,) = h.store.get("orders", 2, 0).messages
    assert (m.body, m.tags, m.keys) == (b"later", "paid", "order-1")
    assert m.properties["PGROUP"] == "shop" and m.properties["DELAY"] == "2"
    assert PROP_REAL_TOPIC not in m.properties
    assert m.born_timestamp <= 1_000_000  # born when sent, not when delivered
    assert h.service.run_once() == 0  # delivered once
    assert h.service.figures() == {"pending": {}, "pending_total": 0, "overdue_s": 0.0,
                                   "delivered_total": 1, "dropped_total": 0}
    h.store.close()


def test_a_level_delivers_in_order_and_stops_at_the_first_not_due(tmp_path, small_config):
    h = Harness(tmp_path / "s", small_config, ManualClock(1_000.0))
    for i in range(3):
        h.send_delayed(b"a%d" % i, level=1)
        h.clock.advance(0.4)
    h.send_delayed(b"b", level=3)  # 10 s, sent at 1001.2
    h.clock.t = 1_001.5  # a0 (due 1001.0) and a1 (1001.4) are due, a2 (1001.8) is not
    assert h.service.run_once() == 2
    assert [b for _, _, b in h.delivered] == [b"a0", b"a1"]
    assert h.service.figures()["pending"] == {"1s": 1, "10s": 1}
    h.clock.t = 1_020.0
    assert h.service.run_once() == 2
    assert [b for _, _, b in h.delivered] == [b"a0", b"a1", b"a2", b"b"]
    h.store.close()


def test_offsets_survive_a_restart_and_a_lost_save_delivers_again(tmp_path, small_config):
    clock = ManualClock(1_000.0)
    h = Harness(tmp_path / "s", small_config, clock)
    for i in range(4):
        h.send_delayed(b"m%d" % i, level=1)
    clock.advance(1)
    h.offsets.set(1, 0)
    h.offsets.save()  # what the tick saved before ...
    assert h.service.run_once() == 4  # ... these were delivered, and the broker crashed
    h.store.close()
    again = Harness(tmp_path / "s", small_config, clock)
    assert again.offsets.get(1) == 0
    assert again.service.run_once() == 4  # at least once: delivered again, none lost
    again.offsets.save()
    again.store.close()
    third = Harness(tmp_path / "s", small_config, clock)
    assert third.service.run_once() == 0 and third.offsets.get(1) == 4
    third.store.close()


def test_a_levels_queue_across_a_segment_roll(tmp_path, small_config):
    h = Harness(tmp_path / "s", small_config, ManualClock(1_000.0))
    body = b"x" * 3000
    for i in range(60):  # ~180 KB through 64 KiB segments
        h.send_delayed(body + b"%d" % i, level=1)
    assert len(h.store.commitlog.segments) > 2
    h.clock.advance(2)
    delivered = 0
    while (n := h.service.run_once()):
        delivered += n
    assert delivered == 60
    got = h.store.get("orders", 2, 0, 64).messages
    assert [m.body[-2:].lstrip(b"x") for m in got] == [b"%d" % i for i in range(60)]
    h.store.close()


def test_a_message_for_a_queue_that_takes_none_is_dropped_and_counted(tmp_path, small_config):
    h = Harness(tmp_path / "s", small_config, ManualClock(1_000.0))
    h.service.deliver = lambda topic, qid, m: False  # e.g. its topic deleted meanwhile
    h.send_delayed(b"x", level=1)
    h.clock.advance(1)
    assert h.service.run_once() == 1  # moved past: not delivered, not blocking the level
    assert h.service.figures()["dropped_total"] == 1 and h.offsets.get(1) == 1
    h.store.close()
