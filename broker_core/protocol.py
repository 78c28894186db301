"""The broker's binary wire protocol (documented in broker_core/PROTOCOL.md).

Every frame is a 16-byte big-endian header followed by a body::

    u32 length      bytes after this field (12 + body), at most MAX_FRAME
    u16 magic       0xF10D
    u8  version     1
    u8  op          Op
    u8  flags       bit 0 RESPONSE, bit 1 ONEWAY (no response wanted)
    u8  reserved    0
    u16 code        Code: 0 in requests, the outcome in responses
    u32 request_id  echoed in the response

Hot-path bodies (SEND, SEND_BATCH, PULL) are packed with struct; control
bodies (offsets, heartbeat, stats, errors) are UTF-8 JSON. Decoding never
trusts a length: every field is bounds-checked and a bad body raises
ProtocolError, which the server answers with BAD_REQUEST.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from broker_core.errors import BrokerError

MAGIC = 0xF10D
VERSION = 1
HEADER = struct.Struct(">IHBBBBHI")
HEADER_SIZE = HEADER.size  # 16
LENGTH_SIZE = 4
MAX_FRAME = 8 * 1024 * 1024  # a 4 MiB message plus a batch's worth of headroom

PRODUCER_GROUP = "PGROUP"  # the message property naming the producer group (RocketMQ's too)

FLAG_RESPONSE = 0x01
FLAG_ONEWAY = 0x02


class Op(IntEnum):
    SEND = 1
    SEND_BATCH = 2
    PULL = 3
    QUERY_OFFSET = 4
    COMMIT_OFFSET = 5
    HEARTBEAT = 6
    STATS = 7
    ROUTE = 8  # topic -> number of queues on this broker
    HA_STATE = 9  # role, epoch, log end: what the controller asks before a promotion
    QUERY_BY_KEY = 10  # messages carrying a key (key index), within a time range
    VIEW_BY_ID = 11  # the message at a message id's physical offset
    QUERY_BY_TIME = 12  # a topic's messages stored within a time range (trace samples)


class Code(IntEnum):
    OK = 0
    BAD_REQUEST = 1
    SYSTEM_ERROR = 2
    SYSTEM_BUSY = 3
    SERVICE_NOT_AVAILABLE = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11  # sync replication, no slave in sync: stored, not replicated
    FLUSH_SLAVE_TIMEOUT = 12  # sync replication, the in-sync slaves did not ack in time
    MESSAGE_TOO_LARGE = 13
    DISK_FULL = 14
    NOT_MASTER = 16  # this broker is a slave (or has no role yet): send to its group's master
    TOPIC_NOT_EXIST = 17
    MESSAGE_ILLEGAL = 18
    PULL_NOT_FOUND = 19  # body still carries offsets (NO_NEW_MSG, OFFSET_* ...)
    FLOW_CONTROL = 20  # over a topic's or group's quota: nothing stored; body has retry-after
    MESSAGE_NOT_FOUND = 21  # VIEW_BY_ID: no message at that offset (expired, never written)


class ProtocolError(BrokerError):
    """A frame or body that does not follow PROTOCOL.md."""


class FrameTooLarge(ProtocolError):
    pass


@dataclass(frozen=True, slots=True)
class Header:
    op: int
    flags: int
    code: int
    request_id: int
    length: int

    @property
    def is_response(self) -> bool:
        return bool(self.flags & FLAG_RESPONSE)

    @property
    def oneway(self) -> bool:
        return bool(self.flags & FLAG_ONEWAY)


def encode_frame(
    op: int, request_id: int, body: bytes = b"", *, flags: int = 0, code: int = 0
) -> bytes:
    length = HEADER_SIZE - LENGTH_SIZE + len(body)
    if length > MAX_FRAME:
        raise FrameTooLarge(f"frame of {length} bytes exceeds the {MAX_FRAME}-byte limit")
    return HEADER.pack(length, MAGIC, VERSION, op, flags, 0, code, request_id) + body


def decode_header(buf: bytes | bytearray | memoryview, offset: int = 0) -> Header:
    """Parse the header at ``offset`` (caller ensures HEADER_SIZE bytes)."""
    length, magic, version, op, flags, _r, code, request_id = HEADER.unpack_from(buf, offset)
    if magic != MAGIC:
        raise ProtocolError(f"bad magic 0x{magic:04x}")
    if version != VERSION:
        raise ProtocolError(f"unsupported protocol version {version}")
    if length < HEADER_SIZE - LENGTH_SIZE:
        raise ProtocolError(f"frame length {length} is shorter than a header")
    if length > MAX_FRAME:
        raise FrameTooLarge(f"frame of {length} bytes exceeds the {MAX_FRAME}-byte limit")
    return Header(op, flags, code, request_id, length)


class FrameDecoder:
    """Incremental frame splitter for a byte stream (one per connection)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    @property
    def pending(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[tuple[Header, bytes]]:
        """Add bytes; return the complete frames. ProtocolError poisons the stream."""
        buf = self._buf
        buf += data
        frames = []
        pos = 0
        while len(buf) - pos >= HEADER_SIZE:
            header = decode_header(buf, pos)
            end = pos + LENGTH_SIZE + header.length
            if end > len(buf):
                break
            frames.append((header, bytes(buf[pos + HEADER_SIZE : end])))
            pos = end
        if pos:
            del buf[:pos]
        return frames


# -- body codecs ---------------------------------------------------------------


class Reader:
    """Bounds-checked cursor over a body."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolError(f"body truncated: need {n} bytes at {self.pos} of {len(self.data)}")
        view = self.data[self.pos : self.pos + n]
        self.pos += n
        return view

    def unpack(self, st: struct.Struct) -> tuple:
        return st.unpack(self._take(st.size))

    def str16(self) -> str:
        (n,) = self.unpack(_U16)
        try:
            return bytes(self._take(n)).decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("string field is not UTF-8") from None

    def bytes32(self) -> bytes:
        (n,) = self.unpack(_U32)
        return bytes(self._take(n))

    def done(self) -> None:
        if self.pos != len(self.data):
            raise ProtocolError(f"{len(self.data) - self.pos} unexpected trailing bytes in body")


_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_SEND_HEAD = struct.Struct(">i")  # queue id, -1 = broker picks
_SEND_RESP = struct.Struct(">iqqq")  # queue id, queue offset, physical offset, store ts ms
_BATCH_HEAD = struct.Struct(">iI")  # queue id, message count
_BATCH_RESP = struct.Struct(">iqI")  # queue id, first queue offset, count
_SERVICE = struct.Struct(">I")  # optional trailer of SEND/SEND_BATCH answers: broker time, µs
_HOST = struct.Struct(">4si")  # optional field of SEND answers: the store host (message id)
_PULL_REQ = struct.Struct(">iqHI")  # queue id, offset, max msgs, timeout ms
_PULL_RESP = struct.Struct(">BqqqI")  # pull status, next, min, max offset, count
_PULL_MSG = struct.Struct(">qq")  # queue offset, store ts ms


def _str16(s: str) -> bytes:
    data = s.encode("utf-8")
    if len(data) > 0xFFFF:
        raise ProtocolError(f"string field of {len(data)} bytes exceeds 65535")
    return _U16.pack(len(data)) + data


def _bytes32(b: bytes) -> bytes:
    return _U32.pack(len(b)) + b


_PROPS_TEXT: dict[tuple, str] = {}  # properties -> their JSON: most messages repeat a few


def encode_props(props: dict[str, str] | None) -> str:
    if not props:
        return ""
    key = tuple(props.items())
    text = _PROPS_TEXT.get(key)
    if text is None:
        text = json.dumps(props, separators=(",", ":"))
        if len(_PROPS_TEXT) < 1024:
            _PROPS_TEXT[key] = text
    return text


_PROPS_DICT: dict[str, dict[str, str]] = {}  # and back: a broker sees the same few too


def decode_props(text: str) -> dict[str, str]:
    if not text:
        return {}
    props = _PROPS_DICT.get(text)
    if props is not None:
        return dict(props)  # a copy: callers may add to it
    try:
        value = json.loads(text)
    except ValueError:
        raise ProtocolError("properties are not JSON") from None
    if not isinstance(value, dict):
        raise ProtocolError("properties must be a JSON object")
    props = {str(k): str(v) for k, v in value.items()}
    if len(_PROPS_DICT) < 1024:
        _PROPS_DICT[text] = props
    return dict(props)


@dataclass(slots=True)
class OutMessage:
    """A message as a producer sends it."""

    body: bytes
    tags: str = ""
    keys: str = ""
    properties: dict[str, str] = field(default_factory=dict)


def _encode_message(m: OutMessage) -> bytes:
    return b"".join(
        (_str16(m.tags), _str16(m.keys), _str16(encode_props(m.properties)), _bytes32(m.body))
    )


def _decode_message(r: Reader) -> OutMessage:
    tags, keys, props = r.str16(), r.str16(), decode_props(r.str16())
    return OutMessage(r.bytes32(), tags, keys, props)


def encode_send(topic: str, queue_id: int, msg: OutMessage) -> bytes:
    return _str16(topic) + _SEND_HEAD.pack(queue_id) + _encode_message(msg)


def decode_send(body: bytes) -> tuple[str, int, OutMessage]:
    r = Reader(body)
    topic = r.str16()
    (queue_id,) = r.unpack(_SEND_HEAD)
    msg = _decode_message(r)
    r.done()
    return topic, queue_id, msg


def encode_send_batch(topic: str, queue_id: int, msgs: list[OutMessage]) -> bytes:
    parts = [_str16(topic), _BATCH_HEAD.pack(queue_id, len(msgs))]
    parts.extend(_encode_message(m) for m in msgs)
    return b"".join(parts)


def decode_send_batch(body: bytes) -> tuple[str, int, list[OutMessage]]:
    r = Reader(body)
    topic = r.str16()
    queue_id, count = r.unpack(_BATCH_HEAD)
    if count == 0 or count > 10_000:
        raise ProtocolError(f"batch of {count} messages (1..10000 allowed)")
    msgs = [_decode_message(r) for _ in range(count)]
    r.done()
    return topic, queue_id, msgs


_RETRY_AFTER = struct.Struct(">I")  # FLOW_CONTROL answers: retry after, µs


def encode_flow_control(retry_after_s: float, reason: str) -> bytes:
    """A FLOW_CONTROL answer: when the refused messages' tokens are back, and why."""
    us = min(0xFFFFFFFF, max(0, math.ceil(retry_after_s * 1e6)))
    return _RETRY_AFTER.pack(us) + reason.encode("utf-8")


def decode_flow_control(body: bytes) -> tuple[float, str]:
    """(retry after, s; the broker's reason) of a FLOW_CONTROL answer."""
    if len(body) < _RETRY_AFTER.size:
        raise ProtocolError("FLOW_CONTROL answer without its retry-after")
    (us,) = _RETRY_AFTER.unpack_from(body)
    return us / 1e6, bytes(body[_RETRY_AFTER.size:]).decode("utf-8", "replace")


def encode_send_response(
    queue_id: int, queue_offset: int, physical_offset: int, store_ts_ms: int,
    store_host: bytes | None = None,
) -> bytes:
    """``store_host``: the broker's 8-byte store host (IPv4, port), from which and the
    physical offset a client makes the message id."""
    out = _SEND_RESP.pack(queue_id, queue_offset, physical_offset, store_ts_ms)
    return out + store_host if store_host is not None else out


def with_service_time(answer: bytes, seconds: float) -> bytes:
    """Append the broker's service time (request read -> answer written) to a
    SEND or SEND_BATCH answer, so a client can tell the broker's part of its RT."""
    return answer + _SERVICE.pack(min(0xFFFFFFFF, max(0, round(seconds * 1e6))))


def _service_time(r: Reader) -> float | None:
    if r.pos == len(r.data):
        return None  # an answer without the trailer (older broker)
    (us,) = r.unpack(_SERVICE)
    return us / 1e6


def decode_send_response(body: bytes) -> tuple[int, int, int, int, float | None]:
    """(queue id, queue offset, physical offset, store ms, broker service s or None)."""
    return decode_send_answer(body)[:5]


def decode_send_answer(body: bytes) -> tuple[int, int, int, int, float | None, str | None]:
    """decode_send_response plus the store host 'ip:port' (None from an older broker)."""
    r = Reader(body)
    out = r.unpack(_SEND_RESP)
    host = None
    if len(r.data) - r.pos in (_HOST.size, _HOST.size + _SERVICE.size):
        ip, port = r.unpack(_HOST)
        host = f"{'.'.join(str(b) for b in ip)}:{port}"
    service = _service_time(r)
    r.done()
    return (*out, service, host)


def encode_batch_response(queue_id: int, first_offset: int, count: int) -> bytes:
    return _BATCH_RESP.pack(queue_id, first_offset, count)


def decode_batch_response(body: bytes) -> tuple[int, int, int, float | None]:
    """(queue id, first queue offset, count, broker service s or None)."""
    r = Reader(body)
    out = r.unpack(_BATCH_RESP)
    service = _service_time(r)
    r.done()
    return (*out, service)


@dataclass(slots=True)
class PullRequest:
    group: str
    topic: str
    queue_id: int
    offset: int
    max_msgs: int = 32
    timeout_ms: int = 0
    tag: str = ""


def encode_pull(req: PullRequest) -> bytes:
    return b"".join(
        (
            _str16(req.group),
            _str16(req.topic),
            _PULL_REQ.pack(req.queue_id, req.offset, req.max_msgs, req.timeout_ms),
            _str16(req.tag),
        )
    )


def decode_pull(body: bytes) -> PullRequest:
    r = Reader(body)
    group, topic = r.str16(), r.str16()
    queue_id, offset, max_msgs, timeout_ms = r.unpack(_PULL_REQ)
    tag = r.str16()
    r.done()
    if not 1 <= max_msgs <= 1024:
        raise ProtocolError(f"max_msgs {max_msgs} out of 1..1024")
    if timeout_ms > 60_000:
        raise ProtocolError(f"pull timeout {timeout_ms} ms above 60000")
    return PullRequest(group, topic, queue_id, offset, max_msgs, timeout_ms, tag)


@dataclass(slots=True)
class PulledMessage:
    topic: str
    queue_id: int
    queue_offset: int
    store_timestamp: int
    body: bytes
    tags: str = ""
    keys: str = ""
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def msg_id(self) -> str | None:
        """Its message id, when the broker sent it (traced messages carry MSG_ID)."""
        return self.properties.get("MSG_ID")


# pull status byte: mirrors the store's GetStatus names
PULL_STATUSES = (
    "FOUND",
    "NO_NEW_MSG",
    "OFFSET_OVERFLOW",
    "OFFSET_TOO_SMALL",
    "NO_MATCHED_MSG",
    "NO_QUEUE",
)


def encode_pull_response(
    status: str, next_offset: int, min_offset: int, max_offset: int, messages: list[PulledMessage]
) -> bytes:
    parts = [
        _PULL_RESP.pack(
            PULL_STATUSES.index(status), next_offset, min_offset, max_offset, len(messages)
        )
    ]
    for m in messages:
        parts.append(_PULL_MSG.pack(m.queue_offset, m.store_timestamp))
        parts.append(_encode_message(OutMessage(m.body, m.tags, m.keys, m.properties)))
    return b"".join(parts)


_PULL_MSG_HEAD = struct.Struct(">qqH")  # queue offset, store ts ms, tags length
_PROPS_SEEN: dict[str, dict[str, str]] = {}  # properties text -> decoded (most repeat)


def decode_pull_response(
    body: bytes, topic: str, queue_id: int
) -> tuple[str, int, int, int, list[PulledMessage]]:
    # The consumer's hot loop (tens of thousands of messages a second): offsets into
    # the bytes instead of a Reader per field, bounds checked once per field.
    data = bytes(body)
    end = len(data)
    if end < _PULL_RESP.size:
        raise ProtocolError(f"body truncated: need {_PULL_RESP.size} bytes, got {end}")
    status_i, next_offset, min_offset, max_offset, count = _PULL_RESP.unpack_from(data)
    if status_i >= len(PULL_STATUSES):
        raise ProtocolError(f"unknown pull status {status_i}")
    pos = _PULL_RESP.size
    msgs = []
    try:
        for _ in range(count):
            if pos + 18 > end:
                raise ProtocolError("body truncated in a message header")
            queue_offset, ts, n = _PULL_MSG_HEAD.unpack_from(data, pos)
            tags = data[pos + 18 : pos + 18 + n].decode("utf-8")
            pos += 18 + n
            keys, pos = _str16_at(data, pos, end)
            props_text, pos = _str16_at(data, pos, end)
            if pos + 4 > end:
                raise ProtocolError("body truncated before a message body")
            (n,) = _U32.unpack_from(data, pos)
            pos += 4
            if pos + n > end:
                raise ProtocolError(f"body truncated: a message body of {n} bytes")
            props = _PROPS_SEEN.get(props_text)
            if props is None:
                props = decode_props(props_text)
                if len(_PROPS_SEEN) < 1024:
                    _PROPS_SEEN[props_text] = props
            msgs.append(PulledMessage(topic, queue_id, queue_offset, ts, data[pos : pos + n],
                                      tags, keys, dict(props) if props else {}))
            pos += n
    except UnicodeDecodeError:
        raise ProtocolError("string field is not UTF-8") from None
    if pos != end:
        raise ProtocolError(f"{end - pos} unexpected trailing bytes in body")
    return PULL_STATUSES[status_i], next_offset, min_offset, max_offset, msgs


def _str16_at(data: bytes, pos: int, end: int) -> tuple[str, int]:
    if pos + 2 > end:
        raise ProtocolError("body truncated in a string length")
    (n,) = _U16.unpack_from(data, pos)
    pos += 2
    if pos + n > end:
        raise ProtocolError(f"body truncated: a string of {n} bytes")
    return data[pos : pos + n].decode("utf-8"), pos + n


def encode_json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), default=str).encode("utf-8")


def decode_json(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body.decode("utf-8")) if body else {}
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError("body is not UTF-8 JSON") from None
    if not isinstance(value, dict):
        raise ProtocolError("JSON body must be an object")
    return value
