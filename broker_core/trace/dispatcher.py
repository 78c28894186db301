"""The client side of tracing (RocketMQ's AsyncTraceDispatcher): records go into a
bounded buffer and one thread sends them in batches to the trace topic, so a
traced send or poll pays for a dict and an append, never for a network call.

Batches leave when one is full or `interval_s` after the first record waiting, and
nothing wakes while nothing waits: a thread (or loop timer) that flushed every 100 ms
woke ten times a second in every traced client, and each of its batches was a send
through the cluster (the demo at 10 msgs/s stored 32 messages a second, 18.5 since).
A second is what `floodgate trace` may wait for a record; a flood fills its batches.

When the buffer is full new records are dropped and counted (tracing must never
slow down or fail the business traffic); a batch that cannot be sent is dropped
and counted too, its error kept (`last_error`) and logged as a warning at most once
a minute: a trace topic the user may not write to lost every record in silence,
and `floodgate trace` could only say the send record was "not written (or lost)".
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial

from broker_core.trace.records import MAX_RECORDS, encode_batch

log = logging.getLogger(__name__)

WARN_EVERY_S = 60.0  # a failing trace topic is logged once a minute, not once a batch


class TraceDispatcher:
    def __init__(self, send: Callable[[bytes, str], object], *, batch: int = 500,
                 interval_s: float = 1.0, max_pending: int = 50_000,
                 close: Callable[[], object] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``send(body, keys)`` delivers one trace message (and raises if it cannot)."""
        self._send = send
        self._close_sender = close
        self.batch = min(batch, MAX_RECORDS)
        self.interval_s = interval_s
        self.max_pending = max_pending
        self._pending: deque[dict] = deque()
        self._wake = threading.Event()
        self._idle = False  # the thread waits for a first record (`add` wakes it)
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.counters = {"records": 0, "sent": 0, "dropped": 0, "messages": 0, "failed": 0}
        self.last_error = ""  # why the latest batch was not sent
        self._clock, self._warn_at = clock, 0.0
        # (loop, send coroutine function, loop thread id) while attached (`attach`)
        self._attached: tuple | None = None
        self._flush_soon = False
        self._timer: asyncio.TimerHandle | None = None
        self._inflight: set[asyncio.Task] = set()

    def add(self, record: dict) -> None:
        """Queue one record; never blocks."""
        c = self.counters
        c["records"] += 1
        if len(self._pending) >= self.max_pending:
            c["dropped"] += 1
            return
        self._pending.append(record)
        att = self._attached
        if att is not None:  # the loop flushes: at once when a batch is full, else on a timer
            on_loop = att[2] == threading.get_ident()
            if self._timer is None:
                if on_loop:
                    self._arm()
                else:
                    att[0].call_soon_threadsafe(self._arm)
            if len(self._pending) >= self.batch and not self._flush_soon and on_loop:
                self._flush_soon = True
                att[0].call_soon(self._flush_on_loop, False)
            return
        if self._thread is None:
            self._start()
        elif (self._idle or len(self._pending) >= self.batch) and not self._wake.is_set():
            self._wake.set()  # once: the thread may take a while to get the GIL

    def _start(self) -> None:
        with self._lock:
            if self._thread is None and not self._stopped.is_set():
                self._thread = threading.Thread(target=self._loop, daemon=True,
                                                name="floodgate-trace")
                self._thread.start()

    def _loop(self) -> None:
        while not self._stopped.is_set():
            self._idle = True  # before looking: a record from here on wakes it
            if not self._pending or self._attached is not None:
                self._wake.wait()
            self._idle = False
            self._wake.clear()
            if self._stopped.is_set():  # (close sends what is left itself)
                return
            self._wake.wait(self.interval_s)  # the batch gathers (a full one wakes it)
            self._wake.clear()
            if self._attached is None:
                self.flush()

    # -- flushing on an event loop instead (AsyncProducer) ----------------------------
    MAX_INFLIGHT = 4  # trace messages on their way from a loop; more waits (or drops)

    def attach(self, send_async: Callable[[bytes, str], Awaitable[object]]) -> None:
        """Flush on the running event loop through ``send_async(body, keys)`` until
        `detach`. The loop's thread makes the records; a second thread taking the GIL
        from it to send them cost the sends more than the sending (bench/trace_cost.py).
        Records added from other threads meanwhile go out on the loop's timer."""
        loop = asyncio.get_running_loop()
        self._attached = (loop, send_async, threading.get_ident())
        if self._pending:
            self._arm()

    def _arm(self) -> None:
        """A partial batch waits: it leaves `interval_s` from now (on the loop)."""
        if self._timer is None and self._attached is not None:
            self._timer = self._attached[0].call_later(self.interval_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._flush_on_loop(True)
        if self._pending:  # (more in flight than MAX_INFLIGHT: the rest on the next)
            self._arm()

    def _flush_on_loop(self, everything: bool) -> None:
        self._flush_soon = False
        att = self._attached
        if att is None:
            return
        pending, take = self._pending, self._pending.popleft
        while (pending and (everything or len(pending) >= self.batch)
               and len(self._inflight) < self.MAX_INFLIGHT):
            records = [take() for _ in range(min(len(pending), self.batch))]
            task = att[0].create_task(att[1](*encode_batch(records)))
            self._inflight.add(task)
            task.add_done_callback(partial(self._sent_from_loop, n=len(records)))

    def _sent_from_loop(self, task: asyncio.Task, n: int) -> None:
        self._inflight.discard(task)
        exc = "cancelled" if task.cancelled() else task.exception()
        if exc is not None:
            self._not_sent(n, exc)
        else:
            self.counters["messages"] += 1
            self.counters["sent"] += n

    async def detach(self, timeout: float = 5.0) -> None:
        """Stop flushing on the loop: send what is queued, wait for what is in flight
        (up to ``timeout``); anything left goes back to the thread."""
        if self._attached is None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = time.monotonic() + timeout
        while self._pending or self._inflight:
            self._flush_on_loop(True)
            left = deadline - time.monotonic()
            if left <= 0 or not self._inflight:
                break
            await asyncio.wait(set(self._inflight), timeout=left,
                               return_when=asyncio.FIRST_COMPLETED)
        self._attached = None
        if self._pending:
            self._start()
            self._wake.set()

    def flush(self) -> int:
        """Send everything queued now, a batch per message; returns records sent."""
        sent = 0
        pending, take = self._pending, self._pending.popleft
        while pending:
            records = [take() for _ in range(min(len(pending), self.batch))]
            body, keys = encode_batch(records)
            try:
                self._send(body, keys)
            except Exception as exc:  # noqa: BLE001 - a lost batch is counted, never raised
                self._not_sent(len(records), exc)
                continue
            self.counters["messages"] += 1
            self.counters["sent"] += len(records)
            sent += len(records)
        return sent

    def _not_sent(self, n: int, exc: BaseException | str) -> None:
        c = self.counters
        c["failed"] += 1
        c["dropped"] += n
        self.last_error = str(exc) or type(exc).__name__
        if self._clock() >= self._warn_at:
            self._warn_at = self._clock() + WARN_EVERY_S
            log.warning("trace batches not sent (%d so far, %d records dropped): %s",
                        c["failed"], c["dropped"], self.last_error)

    def figures(self) -> dict:
        """The counts and the latest error, for a /stats document or --json."""
        return {**self.counters, "last_error": self.last_error}

    def summary(self) -> str:
        """One line: the records traced and what became of them."""
        c = self.counters
        line = f"{c['records']:,} records, {c['sent']:,} sent in {_batches(c['messages'])}"
        if c["dropped"]:
            line += f", {c['dropped']:,} dropped"
            if c["failed"]:
                line += f" ({_batches(c['failed'])} not sent; latest: {self.last_error})"
        return line

    def close(self, timeout: float = 5.0) -> None:
        """Send what is left (up to ``timeout``) and stop."""
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        deadline = time.monotonic() + timeout
        while self._pending and time.monotonic() < deadline:
            self.flush()
        if self._close_sender is not None:
            self._close_sender()


def _batches(n: int) -> str:
    return f"{n:,} batch" + ("" if n == 1 else "es")
