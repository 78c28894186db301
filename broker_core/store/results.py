"""What put and get return: statuses (RocketMQ's names) and result records."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import NamedTuple

from broker_core.protocol.record import Message


class PutStatus(StrEnum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"  # stored, but not durable within the timeout
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"  # bad topic/queue/properties, or too large
    DISK_FULL = "DISK_FULL"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"  # the store is closed
    CONFLICT = "CONFLICT"  # a conditional send: its queue was not at the offset it expected


class GetStatus(StrEnum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"  # offset == max offset: caught up
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"  # scanned units, none matched the tag filter
    OFFSET_OVERFLOW = "OFFSET_OVERFLOW"  # offset > max offset
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"  # below min offset (removed by retention)


class PutResult(NamedTuple):
    """A NamedTuple because it is built on every put (several times cheaper than a dataclass)."""

    status: PutStatus
    physical_offset: int = -1  # of the (first) record
    queue_offset: int = -1  # of the (first) message
    store_timestamp: int = 0  # ms since the epoch
    end_offset: int = -1  # just past the (last) record: what wait_flushed needs
    count: int = 0  # messages stored (put_batch)
    reason: str | None = None  # why, when not PUT_OK

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK


class GetResult(NamedTuple):
    status: GetStatus
    # Message objects from get(); the records' stored bytes from get_records()
    messages: Sequence[Message] | Sequence[bytes] = ()
    next_offset: int = 0  # where the next get of this queue should start
    min_offset: int = 0
    max_offset: int = 0
