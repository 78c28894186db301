"""A leader's entry: the records of several sends, placed where the CommitLog ends.

    entry = EntryBuilder(storage.end_offset(), segment_bytes)
    phys = entry.add(prepared, queue_id, first_queue_offset, born_ms, store_ms, host)
    node.propose([entry.data()], now)

Records carry their own physical offset, so they are encoded for the place they will
hold on every replica. As in the CommitLog's own put path, a block that does not fit
the segment's rest (keeping room for the END-OF-FILE marker) closes the segment with
a blank and starts the next one: the blank and the zeros after it are part of the
entry, so a follower writes the same bytes at the same offsets.
"""

from __future__ import annotations

from collections import Counter

from broker_core.errors import MessageIllegalError
from broker_core.protocol.record import BLANK, BLANK_MAGIC, BLANK_MIN, HEADER, encode_records


class EntryBuilder:
    def __init__(self, log_end: int, segment_bytes: int) -> None:
        self.start = self.end = log_end
        self.segment_bytes = segment_bytes
        self._parts: list[bytes] = []
        self.records = 0

    def add(self, prepared, queue_id: int, first_queue_offset: int, born_ms: int,
            store_ms: int, host: bytes) -> int:
        """Append one queue's records (`record.prepare`); returns the first's offset."""
        size = sum(p[0] for p in prepared)
        if size + BLANK_MIN > self.segment_bytes:
            raise MessageIllegalError(f"{size} bytes of records do not fit one CommitLog "
                                      f"segment of {self.segment_bytes}")
        room = self.segment_bytes - self.end % self.segment_bytes
        if size + BLANK_MIN > room:
            self._parts.append(BLANK.pack(room, BLANK_MAGIC) + bytes(room - BLANK.size))
            self.end += room
        first = self.end
        self._parts.append(encode_records(prepared, queue_id, first_queue_offset, first,
                                          born_ms, store_ms, host))
        self.end += size
        self.records += len(prepared)
        return first

    def data(self) -> bytes:
        return b"".join(self._parts)


def records_by_queue(data: bytes) -> Counter[tuple[str, int]]:
    """How many records of each (topic, queue id) an entry's bytes hold: a new leader
    counts its uncommitted tail to go on numbering each queue after it."""
    out: Counter[tuple[str, int]] = Counter()
    pos = 0
    while pos < len(data):
        size, magic = BLANK.unpack_from(data, pos)
        if magic != BLANK_MAGIC:
            h = HEADER.unpack_from(data, pos)
            at = pos + HEADER.size + h[14]
            out[(data[at + 1:at + 1 + data[at]].decode("ascii"), h[3])] += 1
        pos += size
    return out
