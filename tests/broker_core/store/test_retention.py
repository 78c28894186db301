"""Retention on an injected clock, disk pressure and disk full on a small real tmpfs."""

from __future__ import annotations

import os

from broker_core.store import GetStatus, MessageStore, PutStatus

HOUR = 3600.0
T0 = 1_762_000_000.0


def _cq_files(path) -> int:
    root = os.path.join(path, "consumequeue")
    return sum(len(files) for _, _, files in os.walk(root))


def test_segments_older_than_retention_go_and_queues_follow(tmp_path, small_config):
    now = [T0]
    cfg = small_config(clock=lambda: now[0], consumequeue_units_per_file=16)
    with MessageStore(tmp_path, cfg) as store:
        for i in range(80):
            store.put("T", i % 2, b"o" * 4000)
        now[0] = T0 + 10 * HOUR
        young = [store.put("T", i % 2, b"y" * 4000) for i in range(40)]
        segments = len(store.commitlog.segments)
        cq_files = _cq_files(tmp_path)

        assert store.retention.run_once(now=T0 + 71 * HOUR).deleted == []
        report = store.retention.run_once(now=T0 + 72 * HOUR + 1)
        assert report.expired >= 3 and report.for_disk == 0
        assert len(store.commitlog.segments) == segments - report.expired
        floor = store.commitlog.min_offset
        assert floor <= young[0].physical_offset  # the segment holding young data stays
        assert _cq_files(tmp_path) < cq_files

        for qid in (0, 1):
            lo, hi = store.queue_offsets("T", qid)
            assert 0 < lo < hi == 60
            small = store.get("T", qid, 0)
            assert small.status is GetStatus.OFFSET_TOO_SMALL and small.next_offset == lo
            got = store.get("T", qid, lo, max_msgs=100)
            assert got.status is GetStatus.FOUND
            assert all(m.physical_offset >= floor for m in got.messages)
            assert got.messages[-1].queue_offset == hi - 1

        # Much later everything but the segment being written goes.
        store.retention.run_once(now=T0 + 200 * HOUR)
        assert len(store.commitlog.segments) == 1
        assert store.put("T", 0, b"new").status is PutStatus.PUT_OK
        mins = {q: store.queue_offsets("T", q) for q in (0, 1)}
    with MessageStore(tmp_path, cfg) as store:  # min offsets survive a restart
        assert {q: store.queue_offsets("T", q) for q in (0, 1)} == mins


def test_disk_pressure_deletes_young_segments(tmpfs, small_config):
    path = tmpfs(4 << 20)
    cfg = small_config(commitlog_segment_bytes=256 << 10, preallocate_next=False)
    with MessageStore(path, cfg) as store:
        sent = []
        while store.disk_used_ratio <= 0.80:
            r = store.put("T", 0, b"p" * 8000)
            assert r.status is PutStatus.PUT_OK
            sent.append(r)
        report = store.retention.run_once()  # the clock says: all of it is young
        assert report.expired == 0 and report.for_disk >= 1
        assert report.disk_used_ratio <= 0.75
        lo, hi = store.queue_offsets("T", 0)
        assert lo > 0 and hi == len(sent)
        assert store.get("T", 0, hi - 1).messages[0].body == b"p" * 8000
        assert store.put("T", 0, b"more").status is PutStatus.PUT_OK


def test_over_the_full_ratio_puts_say_disk_full(tmpfs, small_config):
    path = tmpfs(2 << 20)
    cfg = small_config(commitlog_segment_bytes=128 << 10)
    with MessageStore(path, cfg) as store:
        acked = []
        for _ in range(10_000):
            r = store.put("T", 0, b"f" * 6000)
            if r.status is not PutStatus.PUT_OK:
                break
            acked.append(r)
        assert r.status is PutStatus.DISK_FULL, r
        assert store.disk_full and store.stats()["disk"]["full"]
        assert len(acked) > 100
        got = store.get("T", 0, 0, max_msgs=len(acked))
        assert len(got.messages) == len(acked)
    with MessageStore(path, cfg) as store:
        assert store.queue_offsets("T", 0) == (0, len(acked))
        # Whatever room the closed store's spare segment left, it fills up cleanly again.
        statuses = [store.put("T", 0, b"x" * 6000).status for _ in range(40)]
        assert statuses[-1] is PutStatus.DISK_FULL
        assert set(statuses) <= {PutStatus.PUT_OK, PutStatus.DISK_FULL}
        assert store.get("T", 0, 0).messages[0].body == b"f" * 6000


def test_no_room_for_a_new_segment_is_disk_full_not_a_crash(tmpfs, small_config):
    path = tmpfs(2 << 20)
    cfg = small_config(
        commitlog_segment_bytes=128 << 10, disk_max_used_ratio=1.0, disk_full_ratio=1.0
    )
    with MessageStore(path, cfg) as store:
        for _ in range(10_000):
            r = store.put("T", 0, b"e" * 6000)
            if r.status is not PutStatus.PUT_OK:
                break
        assert r.status is PutStatus.DISK_FULL and "No space left" in r.reason
        n = store.queue_offsets("T", 0)[1]
        assert n > 100
        assert store.get("T", 0, n - 1).messages[0].body == b"e" * 6000
    with MessageStore(path, cfg) as store:
        assert store.queue_offsets("T", 0) == (0, n)
        got = store.get("T", 0, n - 5, max_msgs=10)
        assert [m.queue_offset for m in got.messages] == list(range(n - 5, n))


def test_a_retention_pass_is_due_on_its_own_clock(tmp_path, small_config):
    """The disk is checked every second and segments judged every retention interval,
    counted on the service's injected monotonic clock (no sleep); the first round passes
    at once (segments may have expired while the store was down)."""
    from broker_core.store.retention import RetentionService
    from tests.clock import ManualClock

    mono = ManualClock(50.0)
    with MessageStore(tmp_path / "s", small_config()) as store:
        service = RetentionService(store.commitlog, lambda: [], retention_hours=1.0,
                                   disk_max_used_ratio=0.9, wall_clock=lambda: 0.0,
                                   on_disk_ratio=lambda _r: None, retention_interval_s=10.0,
                                   monotonic=mono)
        assert service.pass_due() and not service.pass_due()  # the first, then counted
        mono.advance(9.9)
        assert not service.pass_due()
        mono.advance(0.2)
        assert service.pass_due() and not service.pass_due()  # counted from this one
        mono.advance(9.5)
        assert not service.pass_due()
        mono.advance(1.0)
        assert service.pass_due()


def test_a_segment_filled_between_passes_is_judged_though_the_log_goes_quiet(tmp_path,
                                                                            small_config):
    """A pass finds one segment; a burst then fills a second before the next pass is due,
    and the log goes quiet. The service sleeps only until that pass is due (it slept
    until the log was written again, keeping expired segments on an idle broker)."""
    import math

    from broker_core.store.retention import RetentionService
    from tests.clock import ManualClock

    mono, wall = ManualClock(50.0), [T0]
    with MessageStore(tmp_path / "s", small_config(clock=lambda: wall[0])) as store:
        service = RetentionService(store.commitlog, store.queue_table.all,
                                   retention_hours=1.0, disk_max_used_ratio=0.99,
                                   wall_clock=lambda: wall[0], on_disk_ratio=lambda _r: None,
                                   retention_interval_s=10.0, monotonic=mono)
        service.run_round()  # the first pass: one segment, nothing to judge
        assert len(store.commitlog.segments) <= 1 and service.quiet_for() == math.inf
        while len(store.commitlog.segments) < 3:
            store.put("T", 0, b"o" * 4000)
        mono.advance(1.0)
        service.run_round()  # the disk looked at; no pass due yet
        assert service.quiet_for() == 9.0
        mono.advance(9.0)
        wall[0] = T0 + 2 * HOUR
        assert service.quiet_for() is None  # its pass is owed: a round runs
        service.run_round()
        assert len(store.commitlog.segments) == 1
