"""Records served as stored: what a broker checks before it hands a record's bytes to a
consumer (`check_record`: header sane, the queue unit's record), and how the consumer
reads a PULL answer's records back (`decode_records`: lengths and CRC verified).

RocketMQ serves pulls from the mapped CommitLog without decoding; the CRC, the one
check that needs every byte, is the reader's.
"""

from __future__ import annotations

import zlib

from broker_core.protocol.record import (
    FIXED_SIZE,
    HEADER,
    HEADER_SIZE,
    MESSAGE_MAGIC,
    PROP_KEYS,
    PROP_TAGS,
    CorruptRecord,
    Message,
    decode_properties,
    read_record_header,
)


def check_record(buf, pos: int, physical_offset: int, limit: int, queue_id: int,
                 queue_offset: int, topic_bytes: bytes) -> int:
    """The size of the record at ``buf[pos:]`` if it is the one a queue unit points
    at (header sane, its queue, offset and topic): what a broker checks before it
    serves the bytes to a consumer, which verifies the CRC (`decode_records`).
    Raises CorruptRecord otherwise."""
    h = read_record_header(buf, pos, physical_offset, limit)
    if h[3] != queue_id or h[5] != queue_offset:
        raise CorruptRecord("the record is not the one the queue unit points at")
    at = pos + HEADER_SIZE + h[14]
    if buf[at : at + len(topic_bytes)] != topic_bytes:
        raise CorruptRecord("the record belongs to another topic")
    return h[0]


_PULLED_PROPS: dict[bytes, dict[str, str]] = {}  # most messages repeat a few property sets


def decode_records(buf: bytes, pos: int, count: int) -> tuple[list[Message], int, int]:
    """``count`` records laid end to end from ``buf[pos:]`` (a PULL answer), each
    verified (lengths, CRC): (messages, corrupt records skipped, the offset past the
    last). A record whose CRC or lengths fail is skipped; one whose size cannot be
    trusted ends the answer (CorruptRecord): nothing after it can be framed."""
    out: list[Message] = []
    corrupt = 0
    limit = len(buf)
    unpack = HEADER.unpack_from
    crc32 = zlib.crc32
    cache = _PULLED_PROPS
    for _ in range(count):
        if pos + HEADER_SIZE > limit:
            raise CorruptRecord("pulled records truncated")
        h = unpack(buf, pos)
        size, body_len = h[0], h[14]
        if h[1] != MESSAGE_MAGIC or size < FIXED_SIZE or pos + size > limit:
            raise CorruptRecord(f"pulled record of size {size} with magic {h[1]:#010x}")
        start = pos + HEADER_SIZE
        p = start + body_len
        end = pos + size
        pos = end
        if body_len < 0 or p + 3 > end:
            corrupt += 1
            continue
        body = buf[start:p]
        topic_len = buf[p]
        props_at = p + 1 + topic_len
        props_len = int.from_bytes(buf[props_at : props_at + 2], "big")
        if props_at + 2 + props_len != end or crc32(body) != h[2]:
            corrupt += 1
            continue
        raw = buf[props_at + 2 : end]
        props = cache.get(raw)
        try:
            if props is None:
                props = decode_properties(raw)
                if len(cache) < 1024 and PROP_KEYS not in props:  # keys rarely repeat
                    cache[raw] = props
            topic = buf[p + 1 : props_at].decode("ascii")
        except UnicodeDecodeError:
            corrupt += 1
            continue
        out.append(Message(topic, h[3], h[5], body, props.get(PROP_TAGS), props.get(PROP_KEYS),
                           h[10], h[8], h[6], size, dict(props), h[12], h[11]))
    return out, corrupt, pos
