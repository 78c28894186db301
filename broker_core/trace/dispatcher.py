"""The client side of tracing (RocketMQ's AsyncTraceDispatcher): records go into a
bounded buffer and one thread sends them in batches to the trace topic, so a
traced send or poll pays for a dict and an append, never for a network call.

When the buffer is full new records are dropped and counted (tracing must never
slow down or fail the business traffic); a batch that cannot be sent is dropped
and counted too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from broker_core.trace.records import MAX_RECORDS, TRACE_TOPIC, encode_batch

log = logging.getLogger(__name__)


class TraceDispatcher:
    def __init__(self, send: Callable[[bytes, str], object], *, batch: int = 200,
                 interval_s: float = 0.1, max_pending: int = 50_000,
                 close: Callable[[], object] | None = None) -> None:
        """``send(body, keys)`` delivers one trace message (and raises if it cannot)."""
        self._send = send
        self._close_sender = close
        self.batch = min(batch, MAX_RECORDS)
        self.interval_s = interval_s
        self.max_pending = max_pending
        self._pending: deque[dict] = deque()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.counters = {"records": 0, "sent": 0, "dropped": 0, "messages": 0, "failed": 0}

    @classmethod
    def for_brokers(cls, brokers=None, routes=None, **kwargs) -> TraceDispatcher:
        """A dispatcher whose own producer (no fuse, no tracing) sends to ``brokers``."""
        from broker_core.client.producer import Producer

        producer = Producer(brokers, fuse=False, routes=routes, timeout=3.0)
        return cls(lambda body, keys: producer.send(TRACE_TOPIC, body, keys=keys),
                   close=producer.close, **kwargs)

    def add(self, record: dict) -> None:
        """Queue one record; never blocks."""
        c = self.counters
        c["records"] += 1
        if len(self._pending) >= self.max_pending:
            c["dropped"] += 1
            return
        self._pending.append(record)
        if self._thread is None:
            self._start()
        elif len(self._pending) >= self.batch:
            self._wake.set()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None and not self._stopped.is_set():
                self._thread = threading.Thread(target=self._loop, daemon=True,
                                                name="floodgate-trace")
                self._thread.start()

    def _loop(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            self.flush()

    def flush(self) -> int:
        """Send everything queued now, a batch per message; returns records sent."""
        sent = 0
        while self._pending:
            records = []
            while self._pending and len(records) < self.batch:
                records.append(self._pending.popleft())
            body, keys = encode_batch(records)
            try:
                self._send(body, keys)
            except Exception as exc:  # noqa: BLE001 - a lost batch is counted, never raised
                self.counters["failed"] += 1
                self.counters["dropped"] += len(records)
                log.debug("trace batch of %d records not sent: %s", len(records), exc)
                continue
            self.counters["messages"] += 1
            self.counters["sent"] += len(records)
            sent += len(records)
        return sent

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
