"""The time search offsets are reset by: a binary search on store time over a queue's
units, right at segment edges, before the first and after the last message, on an
empty queue and one retention has trimmed."""

from __future__ import annotations

from broker_core.store import MessageStore
from tests.clock import ManualClock


def test_the_first_offset_stored_at_or_after_a_time(tmp_path, small_config):
    clock = ManualClock(1_000.0)
    with MessageStore(tmp_path / "s", small_config(clock=clock)) as store:
        for _ in range(60):  # 3 KB each over 64 KiB segments: rolls every ~20
            store.put("t", 0, b"x" * 3000)
            clock.advance(1.0)
        assert len(store.commitlog.segments) >= 3
        times = [store.store_time_at("t", 0, i) for i in range(60)]
        assert times == [1_000_000 + 1000 * i for i in range(60)]
        for i in range(60):
            assert store.offset_at_time("t", 0, times[i]) == i  # exactly at: that one
            assert store.offset_at_time("t", 0, times[i] - 1) == i  # just before: that one
        assert store.offset_at_time("t", 0, 0) == 0  # before everything: the first
        assert store.offset_at_time("t", 0, times[-1] + 1) == 60  # after: the end
        assert store.store_time_at("t", 0, 60) is None
        assert store.offset_at_time("t", 1, 5) == 0  # a queue never written
        assert store.offset_at_time("nosuch", 0, 5) == 0


def test_an_equal_time_run_starts_at_its_first_message(tmp_path, small_config):
    clock = ManualClock(2_000.0)
    with MessageStore(tmp_path / "s", small_config(clock=clock)) as store:
        for i in range(10):
            store.put("t", 0, b"m")
            if i in (2, 6):
                clock.advance(0.5)
        assert store.offset_at_time("t", 0, 2_000_500) == 3
        assert store.offset_at_time("t", 0, 2_000_501) == 7
