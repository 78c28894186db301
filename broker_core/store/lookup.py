"""Finding messages other than by queue and offset: at a physical offset (a message
id), by key through the key index, and by store time within a topic.

Every hit is read back and verified (magic, lengths, position, body CRC) and,
for a key, checked to carry that key: the index only narrows the search, so a
hash collision or an entry left from an older life of an offset never shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker_core.errors import MessageIllegalError, MessageNotFoundError, StoreClosedError
from broker_core.protocol.record import HEADER, CorruptRecord, Message, decode_record
from broker_core.store.commitlog import CommitLog
from broker_core.store.index_service import IndexService

FOREVER_MS = 2**62


@dataclass
class KeyQueryResult:
    messages: list[Message] = field(default_factory=list)  # newest first
    more: bool = False  # the limit was reached: older matches may exist
    candidates: int = 0  # index entries read (collisions included)


def message_at(commitlog: CommitLog, phys: int, end: int | None = None) -> Message:
    """The verified record starting at ``phys`` (below `end`, by default what readers
    see); MessageNotFoundError saying why not."""
    lo, hi = commitlog.min_offset, commitlog.write_offset if end is None else end
    if phys < lo:
        raise MessageNotFoundError(f"offset {phys} is below the commitlog's first kept offset "
                                   f"{lo}: expired by retention")
    if phys >= hi:
        raise MessageNotFoundError(f"offset {phys} is at or past the commitlog's end {hi}: "
                                   "never written here")
    seg = commitlog.segment_for(phys)
    if seg is None:
        raise MessageNotFoundError(f"offset {phys}: its segment was just removed")
    try:
        return decode_record(seg.mm, phys - seg.start_offset, phys, seg.size)
    except CorruptRecord as exc:
        raise MessageNotFoundError(f"no message starts at offset {phys} ({exc})") from None
    except ValueError:  # the segment was unmapped by retention meanwhile
        raise MessageNotFoundError(f"offset {phys}: expired by retention") from None


def query_by_key(commitlog: CommitLog, index: IndexService, key: str, topic: str | None,
                 begin_ms: int, end_ms: int, limit: int) -> KeyQueryResult:
    """Messages carrying ``key`` (of ``topic`` if given) stored in [begin_ms, end_ms]."""
    cap = 2 * limit + 16  # collisions and other topics' messages take their share
    hits = index.lookup(key, begin_ms, end_ms, cap)
    out = KeyQueryResult(candidates=len(hits), more=len(hits) >= cap)
    seen: set[int] = set()
    for phys, _ts in hits:
        if phys in seen:
            continue
        seen.add(phys)
        try:
            msg = message_at(commitlog, phys)
        except MessageNotFoundError:
            continue  # expired, or cut by recovery after the entry was written
        if topic and msg.topic != topic or key not in (msg.keys or "").split():
            continue
        out.messages.append(msg)
        if len(out.messages) >= limit:
            out.more = True
            break
    return out


def store_ts(commitlog: CommitLog, phys: int) -> int | None:
    seg = commitlog.segment_for(phys)
    if seg is None:
        return None
    try:
        return HEADER.unpack_from(seg.mm, phys - seg.start_offset)[10]
    except (ValueError, IndexError):
        return None


def offset_at_time(commitlog: CommitLog, cq, ms: int) -> int:
    """The first queue offset of `cq` stored at or after `ms` (its end when none is): a
    binary search on store time over the queue's units, a CommitLog header read a step
    (RocketMQ's getOffsetInQueueByTime), never a scan."""
    lo, hi = cq.min_offset, cq.max_offset
    while lo < hi:
        mid = (lo + hi) // 2
        ts = store_ts(commitlog, cq.unit(mid)[0])
        if ts is not None and ts < ms:
            lo = mid + 1
        else:
            hi = mid
    return lo


def messages_between(commitlog: CommitLog, queues, begin_ms: int, end_ms: int,
                     limit: int) -> list[Message]:
    """Up to ``limit`` messages of the given ConsumeQueues stored in [begin_ms, end_ms],
    oldest first: a binary search on store time per queue, then a walk."""
    found: list[Message] = []
    for cq in queues:
        lo = offset_at_time(commitlog, cq, begin_ms)
        for _qo, phys, _size, _th in cq.units(lo, limit):
            try:
                msg = message_at(commitlog, phys)
            except MessageNotFoundError:
                continue
            if msg.store_timestamp > end_ms:
                break
            found.append(msg)
    found.sort(key=lambda m: m.store_timestamp)
    return found[:limit]


class StoreLookups:
    """MessageStore's ways to find messages other than by queue (a message id's offset,
    a key, a time range): what it needs of the store is its CommitLog, queues, key
    index, whether it is closed and where its log ends."""

    commitlog: CommitLog
    index: IndexService
    _queues: dict
    _closed: bool

    def message_at(self, phys: int) -> Message:
        """The message at a physical offset (a message id's); MessageNotFoundError if none.
        A record the gate holds is found too (a send retried before it was committed)."""
        if self._closed:
            raise StoreClosedError("store is closed")
        return message_at(self.commitlog, phys)

    def query_by_key(self, key: str, topic: str | None = None, begin_ms: int = 0,
                     end_ms: int = FOREVER_MS, limit: int = 64) -> KeyQueryResult:
        """Messages whose KEYS hold ``key``, newest first, stored in [begin_ms, end_ms]."""
        if self._closed:
            raise StoreClosedError("store is closed")
        if not isinstance(key, str) or not key or key != key.strip() or " " in key:
            raise MessageIllegalError(f"a key is one non-empty word, got {key!r}")
        if type(limit) is not int or limit < 1:
            raise MessageIllegalError(f"limit must be a positive int, got {limit!r}")
        return query_by_key(self.commitlog, self.index, key, topic, begin_ms, end_ms, limit)

    def messages_between(self, topic: str, begin_ms: int, end_ms: int,
                         limit: int = 64) -> list[Message]:
        """Messages of ``topic`` stored in [begin_ms, end_ms], oldest first."""
        queues = [cq for (t, _q), cq in sorted(self._queues.items()) if t == topic]
        return messages_between(self.commitlog, queues, begin_ms, end_ms, limit)

    def offset_at_time(self, topic: str, queue_id: int, ms: int) -> int:
        """The first offset of the queue stored at or after `ms` (epoch ms); its end
        offset when every message is older, its min offset when every one is newer."""
        cq = self._queues.get((topic, queue_id))
        return offset_at_time(self.commitlog, cq, ms) if cq is not None else 0

    def store_time_at(self, topic: str, queue_id: int, offset: int) -> int | None:
        """When the message at `offset` was stored (epoch ms); None past the end or
        below what retention kept."""
        cq = self._queues.get((topic, queue_id))
        if cq is None or not cq.min_offset <= offset < cq.max_offset:
            return None
        return store_ts(self.commitlog, cq.unit(offset)[0])
