"""Start-up recovery: find the true end of the CommitLog and make the ConsumeQueues agree.

The scan starts at the checkpoint's safe offset (everything below it is
durable, queue units included), so a clean restart scans nothing; after a
crash it starts at the beginning of the segment holding that offset. Each record
from there is verified (magic, lengths, physical offset, body CRC); the first
one that fails, or zeros, marks the end. Everything after the end is cut
(zeroed, later segments deleted) and the cut bytes are reported; queue units
at or beyond the safe offset are dropped and rebuilt from the scanned records.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from broker_core.protocol.record import (
    BLANK,
    BLANK_MAGIC,
    BLANK_MIN,
    CorruptRecord,
    Message,
    decode_record,
    tag_hash,
)
from broker_core.store.checkpoint import Checkpoint
from broker_core.store.commitlog import CommitLog
from broker_core.store.consume_queue import ConsumeQueue
from broker_core.store.index_service import IndexService, split_keys


@dataclass
class RecoveryReport:
    crashed: bool  # the abort file was there: the last run did not close cleanly
    checkpoint_offset: int | None
    scanned_from: int
    recovered_to: int  # the CommitLog's write offset after recovery
    records_replayed: int  # records found beyond the safe offset (queue units rebuilt)
    truncated_bytes: int  # non-zero bytes cut after the last good record
    queue_units_removed: int
    stop_reason: str
    seconds: float
    index_entries_removed: int = 0  # key index entries at or after the replay start (re-added)

    def to_dict(self) -> dict:
        return asdict(self)


def recover(
    commitlog: CommitLog,
    queues: Iterable[ConsumeQueue],
    queue_for: Callable[[str, int], ConsumeQueue],
    checkpoint: Checkpoint | None,
    crashed: bool,
    index: IndexService | None = None,
) -> RecoveryReport:
    t0 = time.perf_counter()
    lo = commitlog.min_offset
    hi = commitlog.segments[-1].end_offset if commitlog.segments else lo
    start = checkpoint.safe_offset if checkpoint is not None else lo
    if not lo <= start <= hi or not _is_boundary(commitlog, start):
        start = lo  # a stale or wrong checkpoint: scan everything there is
    removed = sum(cq.truncate_from_phys(start) for cq in list(queues))
    # the key index is cut at the same place and rebuilt with the queue units: an entry
    # must never outlive the record it points at
    index_cut = index.truncate_from(start) if index is not None else 0

    replayed = 0

    def dispatch(msg: Message) -> None:
        nonlocal replayed
        cq = queue_for(msg.topic, msg.queue_id)
        cq.put_unit(msg.queue_offset, msg.physical_offset, msg.size, tag_hash(msg.tags))
        seg = commitlog.segment_for(msg.physical_offset)
        seg.max_store_timestamp = max(seg.max_store_timestamp, msg.store_timestamp)
        if index is not None and msg.keys:
            index.add(split_keys(msg.keys), msg.physical_offset, msg.store_timestamp)
        replayed += 1

    # After a crash, re-verify the whole segment holding the safe offset too
    # (RocketMQ re-reads its last files): a torn page there must not survive.
    verify_from = start
    if crashed and commitlog.segments:
        seg = commitlog.segment_for(start) or commitlog.segments[-1]
        verify_from = min(start, seg.start_offset)
    end, reason = scan(
        commitlog, verify_from, lambda m: dispatch(m) if m.physical_offset >= start else None
    )
    if end < start:  # corruption below the safe offset: queue units past it go as well
        removed += sum(cq.truncate_from_phys(end) for cq in list(queues))
        if index is not None:
            index_cut += index.truncate_from(end)
    cut = commitlog.truncate(end)
    for seg in commitlog.segments:
        if seg.end_offset > start:
            seg.flush()  # replayed records may live only in the page cache after a kill
    return RecoveryReport(
        crashed=crashed,
        checkpoint_offset=checkpoint.safe_offset if checkpoint is not None else None,
        scanned_from=verify_from,
        recovered_to=end,
        records_replayed=replayed,
        truncated_bytes=cut,
        queue_units_removed=removed,
        stop_reason=reason,
        seconds=time.perf_counter() - t0,
        index_entries_removed=index_cut,
    )


def _is_boundary(commitlog: CommitLog, offset: int) -> bool:
    """Whether ``offset`` holds a valid record, a blank, zeros, or is a segment end."""
    seg = commitlog.segment_for(offset)
    if seg is None:
        return True
    end, reason = scan(commitlog, offset, lambda m: None, limit=1)
    return end > offset or reason == "clean end"


def scan(
    commitlog: CommitLog,
    start: int,
    dispatch: Callable[[Message], None],
    limit: int | None = None,
) -> tuple[int, str]:
    """Walk verified records from ``start``; returns (end offset, why the walk stopped)."""
    pos = start
    seen = 0
    while limit is None or seen < limit:
        seg = commitlog.segment_for(pos)
        if seg is None:
            return pos, "end of segments"
        local = pos - seg.start_offset
        mm = seg.mm
        if seg.size - local < BLANK_MIN:
            return pos, f"corrupt at {pos}: no room for an end-of-file marker"
        size, magic = BLANK.unpack_from(mm, local)
        if size == 0 and magic == 0:
            return pos, "clean end"
        if magic == BLANK_MAGIC:
            if size != seg.size - local:
                return pos, f"corrupt at {pos}: end-of-file marker of wrong size {size}"
            pos = seg.end_offset
            seen += 1
            continue
        try:
            msg = decode_record(mm, local, pos, seg.size)
        except CorruptRecord as exc:
            return pos, f"corrupt at {pos}: {exc}"
        dispatch(msg)
        pos += msg.size
        seen += 1
    return pos, "limit"
