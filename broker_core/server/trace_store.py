"""The broker's part of a trace: a ``store`` record for every traced message it
stores (queue, offset, store time, the answer code: the flush and replication
outcome), written to its own store in the trace topic as one message per batch,
so it costs a dict per traced send and one put per batch, never a network call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker_core.message_id import encode_id
from broker_core.protocol import Code
from broker_core.store import MessageStore, PutStatus
from broker_core.trace.records import MAX_RECORDS, TRACE_TOPIC, encode_batch

log = logging.getLogger(__name__)
BATCH = 200  # records per trace message; a fuller buffer is written at once
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
        self._pending: list[dict] = []
        self.counters = {"records": 0, "messages": 0, "dropped": 0}

    def add(self, result, topic: str, queue_id: int, code: int) -> None:
        """One traced message stored (a PutResult), answered with ``code``."""
        # a records.FIELDS["store"] tuple; the id is made when the batch is written
        self._pending.append(("store", result.physical_offset, self.name, self.addr, topic,
                              queue_id, result.queue_offset, result.store_timestamp,
                              _CODE_NAMES.get(code) or Code(code).name, self.flush_mode,
                              self.replication()))
        self.counters["records"] += 1
        if len(self._pending) >= BATCH:
            self.flush()

    def flush(self) -> int:
        """Write what is pending (the broker's tick calls it every second)."""
        pending, self._pending = self._pending, []
        if pending and not self.writable():
            self.counters["dropped"] += len(pending)
            return 0
        addr = self.addr
        pending = [(r[0], encode_id(addr, r[1]), *r[2:]) for r in pending]
        for i in range(0, len(pending), MAX_RECORDS):
            records = pending[i : i + MAX_RECORDS]
            body, keys = encode_batch(records)
            result = self.store.put(TRACE_TOPIC, 0, body, keys=keys, wait=False)
            if result.status is not PutStatus.PUT_OK:
                self.counters["dropped"] += len(records)
                log.debug("trace records dropped: %s", result.reason or result.status)
                continue
            self.counters["messages"] += 1
            if self.on_appended is not None:
                self.on_appended(result.end_offset)
        return len(pending)
