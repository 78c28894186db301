"""The read path of get(): queue units -> CommitLog records, filtered and verified.

Units are read lazily, so a scan stops at ``max_msgs`` hits or after
MAX_SCAN_UNITS units (a tag that matches nothing must not scan a whole
queue). Records are decoded with their CRC checked and must name the queue
and offset the unit points from; one that fails is skipped and counted,
never returned.
"""

from __future__ import annotations

from broker_core.store.commitlog import CommitLog
from broker_core.store.consume_queue import ConsumeQueue
from broker_core.store.message import CorruptRecord, Message
from broker_core.store.tags import TagFilter

MAX_SCAN_UNITS = 4096


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
