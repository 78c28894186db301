"""The leader's put path: every store put of one loop turn rides one Raft entry.

`MessageStore` hands its puts here while its group runs Raft (store.appender). A put
is numbered at once (its queue offset: what readers see of the queue plus what is
proposed and not yet committed), encoded where the log will end (raft.entry_bytes)
and answered with the offsets it will hold; the entry holding it is proposed when
the loop turn ends, so sends that arrived together share one append, one fsync and
one round of replication (the Mogujie talk's "several messages in one value"). The
write path then parks the answer until the entry is committed (raft.group).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

from broker_core.raft.entry_bytes import EntryBuilder
from broker_core.store.replica import MAX_KNOWN, Indexed
from broker_core.store.results import PutResult, PutStatus

MAX_ENTRY_BYTES = 1 << 20  # an entry this big is proposed at once, not at the turn's end


class RaftAppender:
    def __init__(self, store, end_offset: Callable[[], int],
                 propose: Callable[[bytes, Counter], None],
                 schedule: Callable[[Callable[[], None]], None], host: bytes,
                 known: dict[int, Indexed]) -> None:
        """`propose(data, counts)`: the entry's bytes and its records per queue;
        `schedule(fn)`: run fn once the loop turn ends (loop.call_soon); `known`: where
        each record's queue unit and keys go, to be published without parsing it back
        (raft.commitlog_storage)."""
        self.known = known  # (the storage's: what no publish reads must not be kept)
        self.store, self._end_offset = store, end_offset
        self._propose, self._schedule = propose, schedule
        self.host = host
        self.pending: Counter[tuple[str, int]] = Counter()  # proposed, not yet readable
        self._entry: EntryBuilder | None = None
        self._counts: Counter[tuple[str, int]] = Counter()
        self._lock = threading.Lock()  # a put from another thread (rare) and the turn's end
        self.stopped = False  # the group closed: nothing more is taken

    def append(self, topic: str, queue_id: int, prepared, born_ts, now_ms: int,
               keys=(), each_keys: list[list[str]] | None = None) -> PutResult:
        """`keys`: every record's index keys; `each_keys`: instead, each record's own."""
        n = len(prepared)
        if self.stopped:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason="the raft group stopped")
        with self._lock:
            cq = self.store.queue_table.queues.get((topic, queue_id)) or \
                self.store.queue_table.get_or_create(topic, queue_id)
            key = (topic, queue_id)
            first_qo = cq.max_offset + self.pending.get(key, 0)  # (not a Counter's __missing__)
            entry = self._entry
            if entry is None:
                entry = self._entry = EntryBuilder(self._end_offset(), self.store.commitlog
                                                   .allocator.size)
                self._schedule(self.flush)
            phys = entry.add(prepared, queue_id, first_qo,
                             now_ms if born_ts is None else born_ts, now_ms, self.host)
            known, at = self.known, phys
            if len(known) < MAX_KNOWN:
                for i, p in enumerate(prepared):
                    k = keys or (each_keys[i] if each_keys is not None else None)
                    known[at] = (p[0], topic, queue_id, first_qo + i, p[4], now_ms,
                                 list(k) if k else None)
                    at += p[0]
            pending, counts = self.pending, self._counts
            pending[key] = pending.get(key, 0) + n
            counts[key] = counts.get(key, 0) + n
            big = entry.end - entry.start >= MAX_ENTRY_BYTES
        result = PutResult(PutStatus.PUT_OK, phys, first_qo, now_ms, entry.end, n)
        if big:
            self.flush()
        return result

    def log_end(self) -> int:
        """The log's end (the open entry's records not in it yet: `flush` first)."""
        return self._end_offset()

    def flush(self) -> None:
        """Propose the open entry (the loop turn ended, or it is big)."""
        with self._lock:
            entry, counts = self._entry, self._counts
            self._entry, self._counts = None, Counter()
        if entry is not None and entry.records:
            self._propose(entry.data(), counts)

    def published(self, counts: Counter) -> None:
        """Records of these queues became readable: no longer pending."""
        with self._lock:
            pending = self.pending
            for key, n in counts.items():  # (by hand: `+= Counter()` built a new one a commit)
                if (left := pending.get(key, 0) - n) > 0:
                    pending[key] = left
                else:
                    pending.pop(key, None)

    def reset(self, pending: Counter) -> None:
        """Leadership began (with this uncommitted tail) or ended (nothing)."""
        with self._lock:
            self.known.clear()  # (what the last role read ahead is parsed when published)
            self.pending = Counter(pending)
            self._entry, self._counts = None, Counter()
