"""The broker's write path: admission, drill faults, the flush and replication waits.

Fast failure (the Double-11 talk, RocketMQ's "PageCache busy"): when the write path is
backed up — too many writes in flight, or the oldest one not yet stored waiting
longer than `busy_after_ms` — a send is answered SYSTEM_BUSY at once instead of
queueing, so the producer's fuse can route around the sick broker. A write already
stored and waiting for its promise (the disk, the slaves) counts toward the
in-flight bound but not the age: that wait has its own timeout and answer
(FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT), as in RocketMQ, whose busy answer is
for sends queued before the put (waitTimeMillsInSendQueue). A slave starved of
CPU for 200 ms made healthy masters answer busy, and the fuse isolated them for
errors. Runs on the loop
thread; the put itself is a memcpy into an mmap'd segment, cheap enough to
run inline.

`write` is the one entry: with no fault and no sync flush (the common case) the
put runs at once and, unless the slaves must ack it, so does the answer; with sync
replication the answer waits on the slaves' acks through a callback (no task, no
future); a drill fault or a sync flush takes a coroutine.
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
    PutStatus.CONFLICT: Code.CONFLICT,
}

Done = Callable[[int, object], None]  # (code, a PutResult or, when refused, the reason)


class WritePath:
    def __init__(self, store: MessageStore, faults: Faults, sync_flush: bool,
                 busy_after_ms: float, max_inflight: int,
                 pause: Callable[[], object] | None = None) -> None:
        self.store, self.faults = store, faults
        self.sync_flush = sync_flush
        self.busy_after_s = busy_after_ms / 1000.0
        self.max_inflight = max_inflight
        self._queued: dict[object, float] = {}  # not stored yet: token -> start, oldest first
        self._waiting = 0  # stored, waiting for the disk or the slaves
        self.busy_refusals = 0
        self.replication = None  # an ha.node.HaNode when the broker is in a group
        self._pause = pause  # awaited before a write while a drill pauses the broker

    @property
    def inflight(self) -> int:
        return len(self._queued) + self._waiting

    def refusal(self, now: float) -> str | None:
        """Why a new write is refused right now (SYSTEM_BUSY), or None."""
        inflight = len(self._queued) + self._waiting
        if inflight >= self.max_inflight:
            return f"write path busy: {inflight} writes in flight"
        if self._queued:
            oldest = next(iter(self._queued.values()))
            if now - oldest > self.busy_after_s:
                return (f"write path busy: {len(self._queued)} writes waiting to be "
                        f"stored, the oldest for {(now - oldest) * 1000:.0f} ms")
        return None

    def write(self, put: Callable[[], object], done: Done) -> tuple[int, object] | None:
        """Run a put through admission, faults and the waits it needs: (code, result)
        now, or None when `done(code, result)` will be called later."""
        if self._queued or self._waiting:
            refused = self.refusal(perf_counter())
            if refused:
                self.busy_refusals += 1
                return Code.SYSTEM_BUSY, refused
        if self.faults.any or self.sync_flush:
            token = object()
            self._queued[token] = perf_counter()
            asyncio.ensure_future(self._slow(put, done, token))
            return None
        result = put()
        ha = self.replication
        if result.status is PutStatus.CONFLICT and hasattr(ha, "barrier"):
            self._waiting += 1  # a raft leader answers what it saw once it surely led then

            def confirmed(code: int) -> None:
                self._waiting -= 1
                done(*_confirmed(code, result))

            ha.barrier(confirmed)
            return None
        if result.status is PutStatus.CONFLICT and ha is not None and ha.sync:
            # the end it saw, answered once the in-sync slaves hold it (a failover cuts
            # what they do not: a CONFLICT must not report an end the group then loses)
            def seen(code: int) -> None:
                self._waiting -= 1
                done(*_seen(code, result))

            code = ha.park(self.store.commitlog.write_offset, seen)
            if code is None:
                self._waiting += 1
                return None
            return _seen(code, result)
        if ha is None or result.status is not PutStatus.PUT_OK:
            return PUT_CODES[result.status], result
        if result.reason is None:  # (a duplicate answered from its first try: not new)
            ha.appended(result.end_offset)
        if not ha.sync:
            return Code.OK, result

        def acked(code: int) -> None:
            self._waiting -= 1
            done(*_replicated(code, result))

        code = ha.park(result.end_offset, acked)
        if code is None:
            self._waiting += 1
            return None
        return _replicated(code, result)

    async def _slow(self, put, done: Done, token: object) -> None:
        stored = [False]
        try:
            if self._pause is not None:
                await self._pause()
            code, result = await self._write_waiting(put, token, stored)
        finally:
            if stored[0]:
                self._waiting -= 1
            else:
                del self._queued[token]
        done(code, result)

    async def _write_waiting(self, put, token: object, stored: list) -> tuple[int, object]:
        if self.faults.should_error():
            return Code.SYSTEM_ERROR, "injected error"
        delay = self.faults.write_delay()
        if delay:
            await asyncio.sleep(delay)
        result = put()
        del self._queued[token]  # stored: from now on its wait is the disk's or the slaves'
        self._waiting += 1
        stored[0] = True
        ha = self.replication
        if result.status is PutStatus.CONFLICT and hasattr(ha, "barrier"):
            fut = asyncio.get_running_loop().create_future()
            ha.barrier(lambda code: fut.done() or fut.set_result(code))
            return _confirmed(await fut, result)
        if result.status is PutStatus.CONFLICT and ha is not None and ha.sync:
            return _seen(await ha.wait_replicated(self.store.commitlog.write_offset), result)
        if ha is not None and result.status is PutStatus.PUT_OK and result.reason is None:
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


def _replicated(code: int, result) -> tuple[int, object]:
    if code == Code.NOT_MASTER:  # demoted while parked: never acknowledged
        return Code.UNACKNOWLEDGED, ("no longer master: stored here, not acknowledged by the "
                                     "slaves; the group's new master may hold it or not")
    return code, result


def _seen(code: int, result) -> tuple[int, object]:
    """A CONFLICT a sync master answers once its in-sync slaves hold the queue's end it
    saw (or none is in sync: the master alone confirms, as for readers)."""
    if code in (Code.OK, Code.SLAVE_NOT_AVAILABLE):
        return Code.CONFLICT, result
    return Code.UNACKNOWLEDGED, ("the queue's end this master saw is not confirmed by its "
                                "slaves (nothing was stored): send again")


def _confirmed(code: int, result) -> tuple[int, object]:
    """A CONFLICT a raft leader answers once it knows it led when it saw the queue."""
    if code == Code.OK:
        return Code.CONFLICT, result
    return code, ("this broker lost its group's leadership before it could confirm what "
                  "it saw of the queue: send again")
