"""The record codec, RocketMQ's layout (big-endian): one message as the CommitLog
stores it and as a PULL answer carries it (the broker serves the stored bytes).

    total size i32 | magic u32 | body CRC32 u32 | queue id i32 | flag i32 |
    queue offset i64 | physical offset i64 | sys flag i32 | born timestamp i64 |
    born host 8B | store timestamp i64 | store host 8B | reconsume times i32 |
    prepared-transaction offset i64 | body length i32 | body |
    topic length u8 | topic | properties length u16 | properties

Hosts are IPv4 (4 bytes) plus port (i32). Properties are RocketMQ's
``key \\x01 value \\x02`` pairs; tags and keys travel as the TAGS and KEYS
properties. A segment's unused tail starts with an END-OF-FILE blank:
total size (the rest of the segment) and BLANK_MAGIC.

The CRC covers the body, as in RocketMQ; readers also check the magic, the
length fields against the total size and the physical offset against the
record's position, which catches torn and shifted records whose body is fine.
"""

from __future__ import annotations

import socket
import struct
import zlib
from dataclasses import dataclass
from functools import lru_cache

from broker_core.errors import MessageIllegalError, MessageTooLargeError
from broker_core.names import MAX_TOPIC, NAME_RULE, TOPIC_RE

MESSAGE_MAGIC = 0xDAA320A7
BLANK_MAGIC = 0xCBD43194
HEADER = struct.Struct(">iIIiiqqiq8sq8siqi")
HEADER_SIZE = HEADER.size  # 88
FIXED_SIZE = HEADER_SIZE + 1 + 2  # plus topic and properties length fields
BLANK = struct.Struct(">iI")
BLANK_MIN = BLANK.size  # a segment always keeps room for the END-OF-FILE marker
MAX_TOPIC_BYTES = MAX_TOPIC
MAX_PROPERTIES_BYTES = 32767

PROP_TAGS = "TAGS"
PROP_KEYS = "KEYS"
_NAME_VALUE = "\x01"
_PROP_SEP = "\x02"


@dataclass(slots=True)
class Message:
    """One stored message as read back from the CommitLog."""

    topic: str
    queue_id: int
    queue_offset: int
    body: bytes
    tags: str | None
    keys: str | None
    store_timestamp: int  # ms since the epoch
    born_timestamp: int
    physical_offset: int
    size: int
    properties: dict[str, str]
    reconsume_times: int = 0
    # the broker that stored it (a slave keeps its master's), as the record holds it
    store_host_raw: bytes = b""

    @property
    def store_host(self) -> str:
        """'ip:port' of the broker that stored it."""
        return unpack_host(self.store_host_raw) if self.store_host_raw else ""

    @property
    def msg_id(self) -> str:
        """The id a send returned: the storing broker and the physical offset
        (message_id.encode_id's layout, made from the record's bytes)."""
        return (self.store_host_raw + self.physical_offset.to_bytes(8, "big")).hex().upper()


def pack_host(host: str) -> bytes:
    """'ip:port' -> 8 bytes (IPv4, then port as i32)."""
    ip, _, port = host.rpartition(":")
    try:
        return socket.inet_aton(ip) + struct.pack(">i", int(port))
    except (OSError, ValueError) as exc:
        raise MessageIllegalError(f"host must be 'ipv4:port', got {host!r}") from exc


def unpack_host(raw: bytes) -> str:
    return f"{socket.inet_ntoa(raw[:4])}:{struct.unpack('>i', raw[4:])[0]}"


@lru_cache(maxsize=4096)
def tag_hash(tags: str | None) -> int:
    """Java's String.hashCode, as RocketMQ stores in ConsumeQueue units (0: no tag)."""
    if not tags:
        return 0
    h = 0
    for ch in tags:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=1024)
def topic_field(topic: str) -> bytes:
    """The topic length byte and the topic, validated."""
    if not isinstance(topic, str) or not TOPIC_RE.match(topic):
        raise MessageIllegalError(f"topic must be 1-{MAX_TOPIC} of {NAME_RULE}, got {topic!r}")
    return bytes([len(topic)]) + topic.encode("ascii")


def _check_prop(text: str, what: str) -> str:
    if not isinstance(text, str):
        raise MessageIllegalError(f"{what} must be a string, got {type(text).__name__}")
    if _NAME_VALUE in text or _PROP_SEP in text:
        raise MessageIllegalError(f"{what} must not contain \\x01 or \\x02")
    return text


def encode_properties(
    tags: str | None, keys: str | list[str] | tuple[str, ...] | None, properties: dict | None
) -> bytes:
    parts = []
    if tags:
        parts.append(f"{PROP_TAGS}{_NAME_VALUE}{_check_prop(tags, 'tags')}{_PROP_SEP}")
    if keys:
        if not isinstance(keys, str):
            keys = " ".join(_check_prop(k, "keys") for k in keys)
        parts.append(f"{PROP_KEYS}{_NAME_VALUE}{_check_prop(keys, 'keys')}{_PROP_SEP}")
    if properties:
        parts.append(_properties_text(properties))
    raw = "".join(parts).encode("utf-8")
    if len(raw) > MAX_PROPERTIES_BYTES:
        raise MessageIllegalError(
            f"properties take {len(raw)} bytes, more than {MAX_PROPERTIES_BYTES}"
        )
    return raw


_PROPS_TEXT: dict[tuple, str] = {}  # most messages carry one of a few property sets


def _properties_text(properties: dict) -> str:
    try:
        key = tuple(properties.items())
        text = _PROPS_TEXT.get(key)
    except TypeError:  # an unhashable value: str() of it, as below, without the cache
        key, text = None, None
    if text is not None:
        return text
    parts = []
    for name, value in properties.items():
        if name in (PROP_TAGS, PROP_KEYS):
            raise MessageIllegalError(f"property {name!r} is reserved; use tags= / keys=")
        parts.append(f"{_check_prop(name, 'property name')}{_NAME_VALUE}"
                     f"{_check_prop(str(value), 'property value')}{_PROP_SEP}")
    text = "".join(parts)
    if key is not None and len(_PROPS_TEXT) < 1024:
        _PROPS_TEXT[key] = text
    return text


def decode_properties(raw: bytes) -> dict[str, str]:
    if not raw:
        return {}
    out = {}
    for pair in raw.decode("utf-8").split(_PROP_SEP):
        if pair:
            name, _, value = pair.partition(_NAME_VALUE)
            out[name] = value
    return out


def prepare(
    topic: str,
    queue_id: int,
    body: bytes,
    tags: str | None,
    keys,
    properties: dict | None,
    max_body: int,
) -> tuple[int, int, bytes, bytes, int]:
    """Validate and encode what does not depend on offsets (outside the put lock).

    Returns (record size, body CRC, body, suffix, tag hash); the suffix is the
    topic and properties fields, ready to copy after the header and body.
    """
    if type(body) is not bytes:
        if not isinstance(body, bytearray | memoryview):
            raise MessageIllegalError(f"body must be bytes, got {type(body).__name__}")
        body = bytes(body)
    body_len = len(body)
    if body_len > max_body:
        raise MessageTooLargeError(f"body of {body_len} bytes is over the {max_body} byte limit")
    if type(queue_id) is not int or not 0 <= queue_id < 2**31:
        raise MessageIllegalError(f"queue id must be an int in [0, 2**31), got {queue_id!r}")
    if tags or keys or properties:
        props = encode_properties(tags, keys, properties)
        suffix = b"".join((topic_field(topic), len(props).to_bytes(2, "big"), props))
        th = tag_hash(tags)
    else:
        suffix = topic_field(topic) + b"\0\0"
        th = 0
    return HEADER_SIZE + body_len + len(suffix), zlib.crc32(body), body, suffix, th


def prepare_batch(topic: str, queue_id: int, bodies, tags, keys, properties: dict | None,
                  max_body: int, segment_bytes: int) -> list[tuple[int, int, bytes, bytes, int]]:
    """`prepare` for each body of a batch: the bodies together within `max_body`, the
    records within one segment (a batch is written as one block, all or nothing)."""
    if isinstance(bodies, bytes | bytearray | memoryview) or not len(bodies):
        raise MessageIllegalError("put_batch needs a non-empty sequence of bodies")
    total = sum(len(b) for b in bodies)
    if total > max_body:
        raise MessageIllegalError(f"batch of {total} bytes is over the {max_body} byte limit")
    prepared = [prepare(topic, queue_id, b, tags, keys, properties, max_body) for b in bodies]
    on_disk = sum(p[0] for p in prepared)
    if on_disk + BLANK_MIN > segment_bytes:
        raise MessageIllegalError(
            f"batch takes {on_disk} bytes with headers, more than a commitlog segment")
    return prepared


def encode_records(prepared, queue_id: int, first_queue_offset: int, physical_offset: int,
                   born_ms: int, store_ms: int, host: bytes) -> bytes:
    """Prepared records (`prepare`) as the CommitLog holds them, the first at
    `physical_offset` with queue offset `first_queue_offset`, the rest after it."""
    parts = []
    phys, qo = physical_offset, first_queue_offset
    for size, crc, body, suffix, _th in prepared:
        parts.append(HEADER.pack(size, MESSAGE_MAGIC, crc, queue_id, 0, qo, phys, 0,
                                 born_ms, host, store_ms, host, 0, 0, len(body)))
        parts.append(body)
        parts.append(suffix)
        phys += size
        qo += 1
    return b"".join(parts)


class CorruptRecord(Exception):
    """Internal: why the bytes at an offset are not a valid record (not part of the API)."""


def read_record_header(buf, pos: int, physical_offset: int, limit: int) -> tuple:
    """Check the header at ``buf[pos:]`` (a record starting at ``physical_offset``).

    Returns the unpacked header; raises CorruptRecord if the record cannot be
    valid within ``limit`` (the end of the segment).
    """
    if pos + HEADER_SIZE > limit:
        raise CorruptRecord("header runs past the segment end")
    h = HEADER.unpack_from(buf, pos)
    size, magic, _crc, queue_id, _flag, queue_offset, phys = (
        h[0],
        h[1],
        h[2],
        h[3],
        h[4],
        h[5],
        h[6],
    )
    if magic != MESSAGE_MAGIC:
        raise CorruptRecord(f"bad magic {magic:#010x}")
    if size < FIXED_SIZE or pos + size > limit:
        raise CorruptRecord(f"bad total size {size}")
    if phys != physical_offset:
        raise CorruptRecord(f"physical offset field {phys} != position {physical_offset}")
    if queue_id < 0 or queue_offset < 0:
        raise CorruptRecord("negative queue id or queue offset")
    body_len = h[14]
    if body_len < 0 or HEADER_SIZE + body_len + 3 > size:
        raise CorruptRecord(f"bad body length {body_len}")
    return h


def _verified(buf, pos: int, physical_offset: int, limit: int, crc: bool = True
              ) -> tuple[tuple, int, int, int]:
    """Check the record at ``buf[pos:]`` (header, body CRC unless `crc` is False, that
    its lengths add up): (its header fields, where its topic starts, where its
    properties start, their length). CorruptRecord when it is not whole."""
    h = read_record_header(buf, pos, physical_offset, limit)
    size, body_len = h[0], h[14]
    start = pos + HEADER_SIZE
    if crc and zlib.crc32(memoryview(buf)[start : start + body_len]) != h[2]:
        raise CorruptRecord("body CRC mismatch")
    p = start + body_len
    topic_len = buf[p]
    props_at = p + 1 + topic_len
    if props_at + 2 > pos + size:
        raise CorruptRecord("topic runs past the record end")
    props_len = int.from_bytes(buf[props_at : props_at + 2], "big")
    if HEADER_SIZE + body_len + 3 + topic_len + props_len != size:
        raise CorruptRecord("length fields do not add up to the total size")
    return h, p + 1, props_at, props_len


def decode_record(buf, pos: int, physical_offset: int, limit: int) -> Message:
    """Decode and fully verify (lengths, CRC) the record at ``buf[pos:]``."""
    h, topic_at, props_at, props_len = _verified(buf, pos, physical_offset, limit)
    size, body_len = h[0], h[14]
    body = bytes(buf[pos + HEADER_SIZE : pos + HEADER_SIZE + body_len])
    try:
        topic = bytes(buf[topic_at:props_at]).decode("ascii")
        props = decode_properties(bytes(buf[props_at + 2 : props_at + 2 + props_len]))
    except UnicodeDecodeError as exc:
        raise CorruptRecord("topic or properties are not valid text") from exc
    return Message(
        topic=topic,
        queue_id=h[3],
        queue_offset=h[5],
        body=body,
        tags=props.get(PROP_TAGS),
        keys=props.get(PROP_KEYS),
        store_timestamp=h[10],
        born_timestamp=h[8],
        physical_offset=physical_offset,
        size=size,
        properties=props,
        reconsume_times=h[12],
        store_host_raw=h[11],
    )


_TAGS_KEY = (PROP_TAGS + _NAME_VALUE).encode()
_KEYS_KEY = (PROP_KEYS + _NAME_VALUE).encode()


def _prop(raw: bytes, name: bytes) -> str | None:
    at = raw.find(name)
    while at > 0 and raw[at - 1] != 2:  # inside another property's value: look further
        at = raw.find(name, at + 1)
    if at < 0:
        return None
    end = raw.find(b"\x02", at)
    return raw[at + len(name) : end if end >= 0 else len(raw)].decode("utf-8")


def index_record(buf, pos: int, physical_offset: int, limit: int, crc: bool = True
                 ) -> tuple[str, int, int, int, int, str | None]:
    """Verify the record at ``buf[pos:]`` as `decode_record` does (lengths, CRC) and
    return only what a ConsumeQueue unit and the key index need: (topic, queue id,
    queue offset, tag hash, store timestamp, keys). A slave indexes every record it
    receives: no body copy, no Message, properties parsed only for TAGS and KEYS.
    `crc=False`: bytes verified already (a raft entry, when it was received)."""
    h, topic_at, props_at, props_len = _verified(buf, pos, physical_offset, limit, crc)
    view = memoryview(buf)
    try:
        topic = bytes(view[topic_at:props_at]).decode("ascii")
        tags = keys = None
        if props_len:
            raw = bytes(view[props_at + 2 : props_at + 2 + props_len])
            tags, keys = _prop(raw, _TAGS_KEY), _prop(raw, _KEYS_KEY)
    except UnicodeDecodeError as exc:
        raise CorruptRecord("topic or properties are not valid text") from exc
    return topic, h[3], h[5], tag_hash(tags), h[10], keys
