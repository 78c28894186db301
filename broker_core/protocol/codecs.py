"""Bodies: the hot-path ones (SEND, SEND_BATCH and their answers) packed with struct,
control ones (offsets, heartbeat, stats, errors) as UTF-8 JSON. Decoding never
trusts a length: every field is bounds-checked and a bad body raises
ProtocolError, which the server answers with BAD_REQUEST.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any

from broker_core.protocol.frame import (
    FLAG_RESPONSE,
    LENGTH_SIZE,
    MAGIC,
    VERSION,
    Op,
    ProtocolError,
)

__all__ = [
    "PRODUCER_GROUP",
    "Reader",
    "encode_props",
    "decode_props",
    "OutMessage",
    "encode_send",
    "decode_send",
    "decode_send_fields",
    "encode_send_batch",
    "decode_send_batch",
    "encode_flow_control",
    "decode_flow_control",
    "encode_send_response",
    "send_answer_frame",
    "with_service_time",
    "decode_send_response",
    "decode_send_answer",
    "encode_batch_response",
    "decode_batch_response",
    "encode_json",
    "decode_json",
]

PRODUCER_GROUP = "PGROUP"  # the message property naming the producer group (RocketMQ's too)


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
_I32 = struct.Struct(">i")


def _str16(s: str) -> bytes:
    data = s.encode("utf-8")
    if len(data) > 0xFFFF:
        raise ProtocolError(f"string field of {len(data)} bytes exceeds 65535")
    return _U16.pack(len(data)) + data


def _bytes32(b: bytes) -> bytes:
    try:  # (free unless raised): a str body said so, not "can't concat str to bytes"
        return _U32.pack(len(b)) + b
    except TypeError:
        raise TypeError(f"a message body is bytes, not {type(b).__name__}") from None


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


def decode_send_fields(body: bytes) -> tuple[str, int, str, str, str, bytes]:
    """(topic, queue id, tags, keys, properties JSON, message body) of a SEND body in
    one pass: the broker's hot path (decode_send is the general form)."""
    b = body
    try:
        pos = 2 + (b[0] << 8 | b[1])
        topic = b[2:pos].decode()
        qid = _I32.unpack_from(b, pos)[0]
        at = pos + 6
        pos = at + (b[at - 2] << 8 | b[at - 1])
        tags = b[at:pos].decode()
        at = pos + 2
        pos = at + (b[pos] << 8 | b[pos + 1])
        keys = b[at:pos].decode()
        at = pos + 2
        pos = at + (b[pos] << 8 | b[pos + 1])
        props = b[at:pos].decode()
        n = _U32.unpack_from(b, pos)[0]
    except (IndexError, struct.error):
        raise ProtocolError(f"SEND body of {len(b)} bytes truncated") from None
    except UnicodeDecodeError:
        raise ProtocolError("string field is not UTF-8") from None
    pos += 4
    if pos + n != len(b):  # also catches a string that ran past the end
        raise ProtocolError(f"SEND body of {len(b)} bytes does not hold its fields")
    return topic, qid, tags, keys, props, b[pos:]


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


# A whole SEND answer frame in one pack: header, the OK body, store host, service time
_SEND_ANSWER = struct.Struct(">IHBBBBHI" "iqqq" "4si" "I")
_SEND_ANSWER_LENGTH = _SEND_ANSWER.size - LENGTH_SIZE


def send_answer_frame(request_id: int, code: int, queue_id: int, queue_offset: int,
                      physical_offset: int, store_ts_ms: int, host_ip: bytes, host_port: int,
                      service_s: float) -> bytes:
    """The answer to a stored SEND (a STORED_CODES code), as the broker writes it."""
    us = int(service_s * 1e6 + 0.5)
    return _SEND_ANSWER.pack(_SEND_ANSWER_LENGTH, MAGIC, VERSION, Op.SEND, FLAG_RESPONSE, 0,
                             code, request_id, queue_id, queue_offset, physical_offset,
                             store_ts_ms, host_ip, host_port, us if us < 0xFFFFFFFF
                             else 0xFFFFFFFF)


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
