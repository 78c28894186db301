"""The broker's write path: admission, drill faults, the flush wait.

Fast failure (seed 000, RocketMQ's "PageCache busy"): when the write path is
backed up — too many writes in flight, or the oldest one waiting longer than
`busy_after_ms` — a send is answered SYSTEM_BUSY at once instead of queueing,
so the producer's fuse can route around the sick broker. Runs on the loop
thread; the put itself is a memcpy into an mmap'd segment, cheap enough to
run inline, and in sync-flush mode the write awaits the group commit without
blocking the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from time import perf_counter

from broker_core.protocol import Code
from broker_core.server.faults import Faults
from broker_core.store import MessageStore, PutStatus

PUT_CODES = {
    PutStatus.PUT_OK: Code.OK,
    PutStatus.FLUSH_DISK_TIMEOUT: Code.FLUSH_DISK_TIMEOUT,
    PutStatus.MESSAGE_ILLEGAL: Code.MESSAGE_ILLEGAL,
    PutStatus.DISK_FULL: Code.DISK_FULL,
    PutStatus.SERVICE_NOT_AVAILABLE: Code.SERVICE_NOT_AVAILABLE,
}


class WritePath:
    def __init__(self, store: MessageStore, faults: Faults, sync_flush: bool,
                 busy_after_ms: float, max_inflight: int) -> None:
        self.store, self.faults = store, faults
        self.sync_flush = sync_flush
        self.busy_after_s = busy_after_ms / 1000.0
        self.max_inflight = max_inflight
        self._inflight: dict[object, float] = {}  # token -> start, oldest first
        self.busy_refusals = 0
        self.replication = None  # an ha.node.HaNode when the broker is in a group

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    @property
    def direct(self) -> bool:
        """May a put go straight through (no fault, nothing queued, no flush wait)?"""
        return (not self.sync_flush and not self.faults.any and not self._inflight
                and (self.replication is None or not self.replication.sync))

    @property
    def parkable(self) -> bool:
        """May a put go straight through and its answer wait only for the slaves'
        acks (no fault, no flush wait)? See `write_parked`."""
        return not self.sync_flush and not self.faults.any

    def write_parked(self, put: Callable[[], object]) -> tuple[int, object] | asyncio.Future:
        """Admission and the put now; with sync replication the outcome, (code,
        result), comes on a future the slaves' acks complete. The parked write
        counts as in flight (SYSTEM_BUSY applies) until then."""
        now = perf_counter()
        refused = self.refusal(now)
        if refused:
            self.busy_refusals += 1
            return Code.SYSTEM_BUSY, refused
        result = put()
        ha = self.replication
        if ha is None or result.status is not PutStatus.PUT_OK:
            return PUT_CODES[result.status], result
        ha.appended(result.end_offset)
        parked = ha.park(result.end_offset)
        if not isinstance(parked, asyncio.Future):
            return _replicated(parked, result)
        token = object()
        self._inflight[token] = now
        out = asyncio.get_running_loop().create_future()

        def done(f: asyncio.Future) -> None:
            del self._inflight[token]
            out.set_result(_replicated(f.result(), result))

        parked.add_done_callback(done)
        return out

    def refusal(self, now: float) -> str | None:
        """Why a new write is refused right now (SYSTEM_BUSY), or None."""
        if not self._inflight:
            return None
        oldest = next(iter(self._inflight.values()))
        if len(self._inflight) >= self.max_inflight or now - oldest > self.busy_after_s:
            return (f"write path busy: {len(self._inflight)} writes in flight, "
                    f"oldest {(now - oldest) * 1000:.0f} ms")
        return None

    async def write(self, put: Callable[[], object]) -> tuple[int, object]:
        """Run a put through admission, faults and the flush wait: (code, result),
        the result a PutResult or, when refused, the reason as text."""
        now = perf_counter()
        refused = self.refusal(now)
        if refused:
            self.busy_refusals += 1
            return Code.SYSTEM_BUSY, refused
        token = object()
        self._inflight[token] = now
        try:
            if self.faults.should_error():
                return Code.SYSTEM_ERROR, "injected error"
            delay = self.faults.write_delay()
            if delay:
                await asyncio.sleep(delay)
            result = put()
            ha = self.replication
            if ha is not None and result.status is PutStatus.PUT_OK:
                ha.appended(result.end_offset)  # slaves may copy it while we flush
            if result.status is PutStatus.PUT_OK and self.sync_flush:
                fut = asyncio.wrap_future(self.store.flushed_future(result.end_offset))
                try:
                    await asyncio.wait_for(fut, self.store.config.sync_flush_timeout_s)
                except TimeoutError:
                    return Code.FLUSH_DISK_TIMEOUT, result
            if ha is not None and ha.sync and result.status is PutStatus.PUT_OK:
                return _replicated(await ha.wait_replicated(result.end_offset), result)
            return PUT_CODES[result.status], result
        finally:
            del self._inflight[token]


def _replicated(code: int, result) -> tuple[int, object]:
    if code == Code.NOT_MASTER:  # demoted while parked: never acknowledged
        return code, "no longer master: not acknowledged, send again"
    return code, result
