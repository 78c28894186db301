"""The broker's part of a trace: what became of the traced messages it stored.

A traced message answered OK needs no record of its own: the message is its own
store record (queue, offset, store time: what VIEW_BY_ID reads back), and its
producer's ``send`` record has the answer. So the broker only counts them, and
once a second writes one ``stored`` summary per window (offsets and times
covered, how many, the flush and replication modes), keyed by the broker's
address and the minutes it covers (`records.stored_key`): finding it takes one
lookup, writing it no per-message index entry. A traced message answered with
anything else (flush or replication timeout, slave not available) gets a
``store`` record keyed by its id: those are the ones an SRE is looking for.

Per-message store records with an index entry each cost the broker a third of a
traced send (bench/trace_cost.py); RocketMQ's trace has no broker record at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker_core.message_id import encode_id
from broker_core.protocol import Code
from broker_core.store import MessageStore, PutStatus
from broker_core.trace.records import MAX_RECORDS, TRACE_TOPIC, encode_batch, stored_keys

log = logging.getLogger(__name__)
_CODE_NAMES = {int(c): c.name for c in Code}


class StoreTracer:
    def __init__(self, store: MessageStore, name: str, addr: str, flush_mode: str,
                 replication: Callable[[], str],
                 on_appended: Callable[[int], None] | None = None,
                 writable: Callable[[], bool] = lambda: True) -> None:
        self.store, self.name, self.addr = store, name, addr
        self.flush_mode = flush_mode
        self.replication = replication  # "none" | "async" | "sync", read when a record is made
        self.on_appended = on_appended  # a master tells its replication about its own writes
        # a broker demoted to slave must not write its own records into its master's log
        self.writable = writable
        self._window: list[int] | None = None  # OK answers: [count, lo, hi phys, lo, hi ms]
        self._pending: list[dict] = []  # other answers: `store` records, id = phys for now
        self.counters = {"records": 0, "messages": 0, "dropped": 0}
        # records made on a client's behalf (grpc_front.tracing), written with these:
        # each source gives what is ready (`final`: all it holds)
        self.sources: list[Callable[[bool], list[dict]]] = []
        # set by the broker's housekeeping: a flush in this many seconds
        self.flush_after: Callable[[float], None] | None = None

    def flush_within(self, delay_s: float) -> None:
        """A source holds records due to go out in `delay_s`: they are written then,
        though the broker has gone idle (its tick flushes only while it works)."""
        if self.flush_after is not None:
            self.flush_after(delay_s)

    def add(self, result, topic: str, queue_id: int, code: int) -> None:
        """One traced message stored (a PutResult), answered with ``code``."""
        phys, ms = result.physical_offset, result.store_timestamp
        if code == Code.OK:
            w = self._window
            if w is None:
                self._window = [1, phys, phys, ms, ms]
            else:  # parked answers (sync replication) may come out of order
                w[0] += 1
                if phys > w[2]:
                    w[2] = phys
                elif phys < w[1]:
                    w[1] = phys
                if ms > w[4]:
                    w[4] = ms
                elif ms < w[3]:
                    w[3] = ms
            return
        # the id is made when the batch is written
        self._pending.append({"type": "store", "id": phys, "broker": self.name,
                              "addr": self.addr, "topic": topic, "queue_id": queue_id,
                              "queue_offset": result.queue_offset, "store_ms": ms,
                              "code": _CODE_NAMES.get(code) or Code(code).name,
                              "flush": self.flush_mode, "replication": self.replication()})
        self.counters["records"] += 1
        if len(self._pending) >= MAX_RECORDS:
            self.flush()

    def flush(self, final: bool = False) -> int:
        """Write the window's summary and what is pending (the broker's tick calls it
        every second; `final` when it stops); returns the traced messages they cover."""
        window, self._window = self._window, None
        pending, self._pending = self._pending, []
        made = [r for source in self.sources for r in source(final)]
        self.counters["records"] += len(made)
        covered = len(pending) + (window[0] if window else 0) + len(made)
        if not covered:
            return 0
        if not self.writable():
            self.counters["dropped"] += covered
            return 0
        if window is not None:
            count, lo, hi, first_ms, last_ms = window
            summary = {"type": "stored", "broker": self.name, "addr": self.addr,
                       "count": count, "from_phys": lo, "to_phys": hi, "from_ms": first_ms,
                       "to_ms": last_ms, "code": "OK", "flush": self.flush_mode,
                       "replication": self.replication()}
            self.counters["records"] += 1
            body, _ids = encode_batch([summary])
            self._write(body, " ".join(stored_keys(self.addr, first_ms, last_ms)), count)
        addr = self.addr
        pending = [{**r, "id": encode_id(addr, r["id"])} for r in pending] + made
        for i in range(0, len(pending), MAX_RECORDS):
            records = pending[i : i + MAX_RECORDS]
            self._write(*encode_batch(records), len(records))
        return covered

    def _write(self, body: bytes, keys: str, covered: int) -> None:
        result = self.store.put(TRACE_TOPIC, 0, body, keys=keys, wait=False)
        if result.status is not PutStatus.PUT_OK:
            self.counters["dropped"] += covered
            log.debug("trace records dropped: %s", result.reason or result.status)
            return
        self.counters["messages"] += 1
        if self.on_appended is not None:
            self.on_appended(result.end_offset)
