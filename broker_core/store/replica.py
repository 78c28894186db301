"""ReplicaLog: a slave's side of the CommitLog, written at its master's physical offsets.

RocketMQ's HA model: the master streams raw CommitLog bytes and the slave
writes them at the same offsets, so the two logs are byte-identical; the
slave then walks the records it received and builds its own ConsumeQueue
units from their headers (the queue offsets the master assigned). Chunks may
end inside a record: ``received`` counts bytes held, the CommitLog's
``write_offset`` only whole records whose units exist (what the checkpoint
and readers rely on). Every record is verified (magic, lengths, position,
body CRC) before it is indexed.

A segment's unused tail after its END-OF-FILE blank is zeros on both sides,
so a blank moves ``write_offset`` to the next segment whether or not those
zeros were sent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from broker_core.errors import StoreCorruptError
from broker_core.protocol.record import BLANK, BLANK_MAGIC, CorruptRecord, index_record
from broker_core.store.commitlog import CommitLog
from broker_core.store.consume_queue_table import ConsumeQueueTable
from broker_core.store.index_service import IndexService, split_keys

log = logging.getLogger(__name__)


class ReplicaGapError(StoreCorruptError):
    """Replicated bytes that do not continue what the slave holds."""


# A record read already, by whoever had it in hand (a raft follower as it verified the
# entry, a raft leader as it built it), so that publishing it does not parse it again
# (at 64 sends in flight, a follower's records were parsed twice: a third of its CPU):
# (size, topic, queue id, queue offset, tag hash, store timestamp, index keys or None)
Indexed = tuple[int, str, int, int, int, int, "list[str] | None"]
MAX_KNOWN = 1 << 16  # records held so at most (one whose publishing lags is parsed then)


class ReplicaLog:
    def __init__(self, commitlog: CommitLog, queues: ConsumeQueueTable, lock: threading.Lock,
                 checkpoint: Callable[[], object], index: IndexService | None = None) -> None:
        self.commitlog = commitlog
        self.index = index
        self.queues = queues
        self._lock = lock  # the store's put lock: one writer of the log at a time
        self._checkpoint = checkpoint
        self.received = commitlog.write_offset
        self.records = 0  # records indexed since start

    @property
    def offset(self) -> int:
        """Just past the last complete record (what a slave acknowledges)."""
        return self.commitlog.write_offset

    def append(self, offset: int, data: bytes | memoryview) -> set[tuple[str, int]]:
        """Write master bytes at ``offset`` and index the records they complete.

        Returns the (topic, queue id) pairs that got messages (to wake long polls).
        Raises ReplicaGapError if ``offset`` leaves a hole after ``received``
        and StoreCorruptError if a received record does not verify.
        """
        cl = self.commitlog
        with self._lock:
            # bytes appended as a master before this log followed one are whole records
            self.received = max(self.received, cl.write_offset)
            if offset > self.received:
                raise ReplicaGapError(f"replicated bytes at {offset} but this slave holds "
                                      f"only up to {self.received}")
            if offset < cl.write_offset:  # already indexed (a resend): skip that part
                data = memoryview(data)[cl.write_offset - offset:]
                offset = cl.write_offset
            pos = cl.write_at(offset, data)
            self.received = max(self.received, pos)
            if self.queues.over:  # under the put lock, as the store's own puts
                self.queues.evict()
            return self._index()

    def hold(self, offset: int, data: bytes | memoryview) -> int:
        """Raft: write bytes at ``offset`` that readers must not see until `publish`;
        returns the offset past them."""
        with self._lock:
            self.received = max(self.received, self.commitlog.write_offset)
            if offset != self.received:
                raise ReplicaGapError(f"entry bytes at {offset} but this log holds up to "
                                      f"{self.received}")
            self.received = self.commitlog.write_at(offset, data)
            return self.received

    def publish(self, end: int, crc: bool = False, known: dict | None = None,
                gate=None) -> set[tuple[str, int]]:
        """Raft: the bytes below `end` are committed; index the records they hold (a
        Raft log holds bytes past write_offset that readers must not see yet). Their
        CRCs are not computed again (`crc` False): made here, or verified when received.
        `known`: records read already, by physical offset (`Indexed`); taken from it.
        `gate` (a store.confirm_gate): the units wait there, not in the queues (a raft
        leader's tail of older terms, shown once a majority holds a record of its own)."""
        with self._lock:
            self.received = max(self.received, self.commitlog.write_offset)
            if end <= self.commitlog.write_offset:
                return set()
            if end > self.received:
                raise ReplicaGapError(f"published up to {end} but this log holds only up "
                                      f"to {self.received}")
            if self.queues.over:
                self.queues.evict()
            return self._index(end, crc=crc, known=known, gate=gate)

    def begin_at(self, offset: int) -> None:
        """An empty log begins at `offset`, the first byte its source still holds."""
        with self._lock:
            self.commitlog.begin_at(offset)
            self.received = offset
        self._checkpoint()

    def withdraw(self, offset: int) -> int:
        """Raft, on start: the records at and after `offset` are not known committed;
        their queue units and keys go (their bytes stay, published again once the
        leader says they are committed). Returns the queue units removed."""
        cl = self.commitlog
        with self._lock:
            offset = max(offset, cl.min_offset)
            if offset >= cl.write_offset:
                return 0
            self.received = max(self.received, cl.write_offset)
            removed = sum(cq.truncate_from_phys(offset) for cq in self.queues.all())
            if self.index is not None:
                self.index.truncate_from(offset)
            cl.advance(offset)
        self._checkpoint()
        return removed

    def _index(self, end: int | None = None, crc: bool = True, known: dict | None = None,
               gate=None) -> set[tuple[str, int]]:
        """Walk complete records from write_offset to `end` (received); write their
        queue units (a record in `known` is not parsed again)."""
        cl = self.commitlog
        pos, end = cl.write_offset, self.received if end is None else end
        touched: set[tuple[str, int]] = set()
        queues = self.queues.queues
        seg = None
        while end - pos >= BLANK.size:
            if seg is None or not seg.start_offset <= pos < seg.end_offset:
                seg = cl.segment_for(pos)
                if seg is None:
                    break
            local = pos - seg.start_offset
            size, magic = BLANK.unpack_from(seg.mm, local)
            if magic == BLANK_MAGIC:
                if size != seg.size - local:
                    raise StoreCorruptError(f"replicated blank at {pos} of wrong size {size}")
                pos = seg.end_offset
                self.received = max(self.received, pos)
                continue
            if size <= 0:
                raise StoreCorruptError(f"replicated record at {pos} has size {size}")
            if pos + size > end:
                break  # the rest of this record is still on its way
            got = known.pop(pos, None) if known else None
            if got is not None and got[0] == size:
                _size, topic, qid, qoff, th, stored, key_list = got
            else:
                try:
                    topic, qid, qoff, th, stored, keys = index_record(seg.mm, local, pos,
                                                                      seg.size, crc)
                except CorruptRecord as exc:
                    raise StoreCorruptError(f"replicated record at {pos} does not verify: "
                                            f"{exc}") from None
                key_list = split_keys(keys) if keys else None
            key = (topic, qid)
            cq = queues.get(key) or self.queues.get_or_create(topic, qid)
            if gate is not None:  # (its keys wait too)
                gate.hold(topic, qid, [(pos, size, th)], pos + size,
                          [(key_list, pos, stored)] if key_list else None)
                key_list = None
            elif qoff == cq.max_offset:
                cq.ensure_capacity(1)
                cq.append_unit(pos, size, th)
            else:
                empty = cq.max_offset == 0
                cq.put_unit(qoff, pos, size, th)
                if empty:  # a log begun past 0: the units below went with its source's
                    cq.min_offset = qoff  # retention
            if key_list and self.index is not None:
                self.index.add(key_list, pos, stored)
            if stored > seg.max_store_timestamp:
                seg.max_store_timestamp = stored
            touched.add(key)
            pos += size
            self.records += 1
        cl.advance(pos)
        return touched

    def truncate(self, offset: int) -> int:
        """Cut the log (and queue units) at ``offset``; returns the non-zero bytes cut.

        The old master turned slave cuts the tail its new master never had; a
        slave promoted to master cuts a record it had only partly received.
        """
        cl = self.commitlog
        with self._lock:
            offset = max(offset, cl.min_offset)
            cl.flush()  # what stays below the cut must be durable before the checkpoint says so
            for cq in self.queues.all():
                cq.truncate_from_phys(offset)
                if self.queues.over:
                    self.queues.evict(keep=cq)
            if self.index is not None:
                self.index.truncate_from(offset)
            readable = min(cl.write_offset, offset)  # (a Raft log may hold more than it shows)
            cut = cl.truncate(offset)
            cl.advance(readable)
            cl.flushed_offset = readable
            self.received = offset
        self._checkpoint()
        if cut:
            log.warning("truncated commitlog at %d: %d bytes cut", offset, cut)
        return cut
