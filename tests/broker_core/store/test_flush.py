"""Flush modes: async thresholds on an injected clock, sync group commit, timeouts, asyncio."""

from __future__ import annotations

import asyncio
import threading

from broker_core.store import MessageStore, PutStatus
from broker_core.store.flush import AsyncFlushService
from broker_core.store.mapped_file import PAGE


def test_async_flush_waits_for_four_dirty_pages_or_the_thorough_interval(tmp_path, small_config):
    with MessageStore(tmp_path, small_config()) as store:
        now = [100.0]
        flushes = []
        svc = AsyncFlushService(store.commitlog, flushes.append, clock=lambda: now[0])
        cl = store.commitlog
        store.put("T", 0, b"x" * 1000)
        assert not svc.run_once() and cl.flushed_offset == 0  # under 4 pages dirty
        while cl.write_offset // PAGE < 4:
            store.put("T", 0, b"x" * 1000)
        assert svc.run_once() and cl.flushed_offset == cl.write_offset
        store.put("T", 0, b"y")
        now[0] += 9.9
        assert not svc.run_once()
        now[0] += 0.2  # 10 s since the last thorough flush: flush even one dirty byte
        assert svc.run_once() and cl.flushed_offset == cl.write_offset
        assert len(flushes) == 2 and all(s >= 0 for s in flushes)
        assert not svc.run_once()  # nothing dirty


def test_sync_put_returns_only_once_flushed(tmp_path, small_config):
    with MessageStore(tmp_path, small_config(flush="sync")) as store:
        for _ in range(20):
            r = store.put("T", 0, b"z" * 500)
            assert r.status is PutStatus.PUT_OK
            assert store.commitlog.flushed_offset >= r.end_offset
        assert store.latency["flush"].count >= 1


def test_group_commit_serves_many_writers_with_few_flushes(tmp_path, small_config):
    with MessageStore(tmp_path, small_config(flush="sync")) as store:
        store.flush_service.injected_delay_s = 0.005  # a slowish disk: writers pile up
        results = []

        def writer(n: int) -> None:
            for _ in range(n):
                results.append(store.put("T", 1, b"w" * 200))

        threads = [threading.Thread(target=writer, args=(10,)) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 160 and all(r.status is PutStatus.PUT_OK for r in results)
        flushes = store.latency["flush"].count
        assert flushes < 160 / 3, f"{flushes} flushes for 160 puts: no group commit"
        assert sorted(r.queue_offset for r in results) == list(range(160))


def test_slow_flush_gives_flush_disk_timeout_and_counts_slow_puts(tmp_path, small_config):
    cfg = small_config(flush="sync", sync_flush_timeout_s=0.3)
    with MessageStore(tmp_path, cfg) as store:
        store.flush_service.injected_delay_s = 0.7
        r = store.put("T", 0, b"late")
        assert r.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert r.queue_offset == 0  # stored, only not yet durable
        assert store.wait_flushed(r.end_offset, timeout=5)  # ... and durable a bit later
        store.flush_service.injected_delay_s = 0.025
        assert store.put("T", 0, b"slow").status is PutStatus.PUT_OK
        stats = store.stats()
        assert stats["puts_over_20ms"] == 2
        assert stats["counters"]["flush_timeouts"] == 1
        store.flush_service.injected_delay_s = 0
        assert store.put("T", 0, b"fast").status is PutStatus.PUT_OK
        assert store.get("T", 0, 0, 10).messages[2].body == b"fast"


def test_nonblocking_put_and_await_the_flush_from_asyncio(tmp_path, small_config):
    with MessageStore(tmp_path, small_config(flush="sync")) as store:

        async def produce() -> list:
            loop_alive = asyncio.Event()
            asyncio.get_running_loop().call_soon(loop_alive.set)
            results = [store.put("T", 0, b"a" * 100, wait=False) for _ in range(50)]
            futs = [asyncio.wrap_future(store.flushed_future(r.end_offset)) for r in results]
            done = await asyncio.wait_for(asyncio.gather(*futs), timeout=5)
            await loop_alive.wait()
            return [r for r, ok in zip(results, done, strict=True) if ok]

        acked = asyncio.run(produce())
        assert len(acked) == 50
        assert store.commitlog.flushed_offset >= acked[-1].end_offset
        assert store.wait_flushed(acked[-1].end_offset, timeout=1)


def test_async_store_can_be_asked_to_make_an_offset_durable(tmp_path, small_config):
    with MessageStore(tmp_path, small_config()) as store:
        r = store.put("T", 0, b"q")
        assert store.commitlog.flushed_offset < r.end_offset
        assert store.wait_flushed(r.end_offset)
        assert store.commitlog.flushed_offset >= r.end_offset


def test_a_future_beyond_the_log_waits_without_spinning(tmp_path, small_config):
    with MessageStore(tmp_path, small_config(flush="sync")) as store:
        r = store.put("T", 0, b"x", wait=False)
        ahead = store.flushed_future(r.end_offset + 100)  # nothing written there yet
        assert not ahead.done()
        store.put("T", 0, b"y" * 200)  # now the log passes that offset
        assert ahead.result(timeout=5) is True


def test_an_idle_stores_threads_sleep_until_the_log_grows(tmp_path, small_config):
    """Flush, checkpoint and disk check each park on an untimed wait once nothing is left
    to do (no wake-up a second to find nothing), and a put rings them awake."""
    from tests.waiting import wait_for

    config = small_config(background_services=True, flush_interval_s=0.01,
                          flush_thorough_interval_s=0.05,
                          cq_flush_interval_s=0.01, disk_check_interval_s=0.01)
    with MessageStore(tmp_path, config) as store:
        services = (store.flush_service, store.cq_flush, store.retention)
        wait_for(lambda: all(s.parked for s in services), 10, "every service parked")
        rounds = [s.rounds for s in services]
        store.put("T", 0, b"x" * 100)
        cl = store.commitlog
        wait_for(lambda: store.cq_flush.last_saved == cl.write_offset == cl.flushed_offset,
                 10, "flushed and checkpointed")
        wait_for(lambda: all(s.parked for s in services), 10, "parked again")
        assert all(s.rounds > r for s, r in zip(services, rounds, strict=True))
