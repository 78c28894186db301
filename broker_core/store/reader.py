"""The read path of get(): queue units -> CommitLog records, filtered and verified.

Units are read lazily, so a scan stops at ``max_msgs`` hits or after
MAX_SCAN_UNITS units (a tag that matches nothing must not scan a whole
queue). Records are decoded with their CRC checked and must name the queue
and offset the unit points from; one that fails is skipped and counted,
never returned.
"""

from __future__ import annotations

from broker_core.protocol.record import (
    PROP_TAGS,
    CorruptRecord,
    Message,
    decode_record,
    topic_field,
)
from broker_core.protocol.record_batch import check_record
from broker_core.store.commitlog import CommitLog
from broker_core.store.consume_queue import ConsumeQueue
from broker_core.store.results import GetResult, GetStatus
from broker_core.store.tags import TagFilter

MAX_SCAN_UNITS = 4096
MAX_READ_BYTES = 6 << 20  # a PULL answer's records stay within a frame (8 MiB)


def read_queue(
    commitlog: CommitLog,
    cq: ConsumeQueue,
    offset: int,
    max_msgs: int,
    filt: TagFilter | None,
) -> tuple[list[Message], int, int]:
    """(messages, next queue offset, corrupt records skipped) from ``offset``."""
    floor = commitlog.min_offset
    messages: list[Message] = []
    next_offset = offset
    corrupt = 0
    for qo, phys, size, th in cq.units(offset, max(max_msgs, MAX_SCAN_UNITS)):
        next_offset = qo + 1
        if phys < floor or (filt and not filt.hash_matches(th)):
            continue
        try:
            msg = commitlog.read_message(phys, size)
        except LookupError:
            continue  # removed by retention while we read
        except CorruptRecord:
            corrupt += 1
            continue  # never serve a record that does not verify
        if msg.queue_offset != qo or msg.queue_id != cq.queue_id or msg.topic != cq.topic:
            corrupt += 1  # the record is not the one the unit points at
            continue
        if filt and not filt.matches(msg.tags):
            continue
        messages.append(msg)
        if len(messages) >= max_msgs:
            break
    return messages, next_offset, corrupt


def read_queue_records(
    commitlog: CommitLog,
    cq: ConsumeQueue,
    offset: int,
    max_msgs: int,
    filt: TagFilter | None,
) -> tuple[list[bytes], int, int]:
    """read_queue's stored bytes instead of decoded messages (what PULL answers carry):
    (records, next queue offset, corrupt records skipped). Each record's header is
    checked (and that it is the queue's); its CRC is the consumer's to verify."""
    floor = commitlog.min_offset
    records: list[bytes] = []
    next_offset = offset
    corrupt = 0
    tf = topic_field(cq.topic)
    qid = cq.queue_id
    seg = None
    nbytes = 0
    for qo, phys, size, th in cq.units(offset, max(max_msgs, MAX_SCAN_UNITS)):
        next_offset = qo + 1
        if phys < floor or (filt and not filt.hash_matches(th)):
            continue
        if seg is None or not seg.start_offset <= phys < seg.end_offset:
            seg = commitlog.segment_for(phys)
            if seg is None:
                continue  # removed by retention while we read
        local = phys - seg.start_offset
        try:
            check_record(seg.mm, local, phys, seg.size, qid, qo, tf)
            raw = seg.mm[local : local + size]
        except CorruptRecord:
            corrupt += 1
            continue  # never serve a record that does not verify
        except ValueError:
            continue  # the segment was removed meanwhile
        if filt and not filt.matches(decode_record(raw, 0, phys, size).properties.get(PROP_TAGS)):
            continue  # a tag hash collision
        nbytes += size
        if records and nbytes > MAX_READ_BYTES:
            next_offset = qo
            break
        records.append(raw)
        if len(records) >= max_msgs:
            break
    return records, next_offset, corrupt


def get_result(commitlog: CommitLog, cq: ConsumeQueue | None, offset: int, max_msgs: int,
               filt: TagFilter | None, read=read_queue) -> tuple[GetResult, int]:
    """A get's answer from the queue's offsets and `read` (read_queue: messages,
    read_queue_records: stored bytes), and how many corrupt records it skipped."""
    lo, hi = (cq.min_offset, cq.max_offset) if cq is not None else (0, 0)
    if offset < lo:
        return GetResult(GetStatus.OFFSET_TOO_SMALL, (), lo, lo, hi), 0
    if offset == hi:
        return GetResult(GetStatus.NO_NEW_MSG, (), offset, lo, hi), 0
    if offset > hi:
        return GetResult(GetStatus.OFFSET_OVERFLOW, (), hi, lo, hi), 0
    messages, next_offset, corrupt = read(commitlog, cq, offset, max_msgs, filt)
    if messages:
        return GetResult(GetStatus.FOUND, messages, next_offset, cq.min_offset,
                         cq.max_offset), corrupt
    if offset < cq.min_offset:  # retention moved the floor while we scanned
        return GetResult(GetStatus.OFFSET_TOO_SMALL, (), cq.min_offset, cq.min_offset,
                         hi), corrupt
    return GetResult(GetStatus.NO_MATCHED_MESSAGE, (), next_offset, lo, hi), corrupt
