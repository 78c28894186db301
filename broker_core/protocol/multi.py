"""SEND_MULTI: independent messages of one topic and queue in one frame, and its answer.

A producer's sends of one turn of its loop to one broker (client.aio_producer) ride one
frame, as Kafka's producer fills a batch within its linger: one request to read, admit,
store and replicate, one answer, where each SEND cost all of that per message. Unlike
SEND_BATCH (RocketMQ's batch: one set of tags, keys and properties for all), each
message keeps its own, and gets its own offsets and message id.

    request: topic (str16), queue id (i32, -1: the broker picks), count (u16), then
             count x a message as in SEND (tags str16, keys str16, properties str16,
             body bytes32)
    answer:  queue id (i32), first queue offset (i64), count (u16), store time ms
             (i64), store host (4 bytes IPv4, i32 port), first physical offset (i64),
             then count x record size (u32): message i's physical offset is the first
             plus the sizes before it; the broker's service time (u32 µs) last

Stored all or none, in one block of the CommitLog: a message that cannot be stored
(illegal properties, too large) refuses the frame.
"""

from __future__ import annotations

import struct

# the string field as every frame of the protocol writes it (codecs, one definition)
from broker_core.protocol.codecs import OutMessage, _str16, encode_props
from broker_core.protocol.frame import ProtocolError

MAX_COUNT = 1024
_HEAD = struct.Struct(">iH")  # queue id, count
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_ANSWER = struct.Struct(">iqHq4siq")  # qid, first qoff, count, store ms, host, first phys
_SERVICE = struct.Struct(">I")


def encode_message(m: OutMessage) -> bytes:
    """One message as SEND and SEND_MULTI carry it."""
    return b"".join((_str16(m.tags), _str16(m.keys), _str16(encode_props(m.properties)),
                     _U32.pack(len(m.body)), m.body))


def encode_multi(topic: str, queue_id: int, messages: list[bytes]) -> bytes:
    """A SEND_MULTI body of messages encoded by `encode_message`."""
    if not 0 < len(messages) <= MAX_COUNT:
        raise ProtocolError(f"SEND_MULTI of {len(messages)} messages (1..{MAX_COUNT})")
    return b"".join((_str16(topic), _HEAD.pack(queue_id, len(messages)), *messages))


def decode_multi(body: bytes) -> tuple[str, int, list[tuple[str, str, str, bytes]]]:
    """(topic, queue id, [(tags, keys, properties text, body)]): every length checked."""
    b = body
    try:
        pos = 2 + (b[0] << 8 | b[1])
        topic = b[2:pos].decode()
        qid, count = _HEAD.unpack_from(b, pos)
        pos += _HEAD.size
        if not 0 < count <= MAX_COUNT:
            raise ProtocolError(f"SEND_MULTI of {count} messages (1..{MAX_COUNT})")
        out = []
        for _ in range(count):
            fields = []
            for _field in range(3):
                at = pos + 2
                pos = at + (b[pos] << 8 | b[pos + 1])
                if pos > len(b):
                    raise IndexError
                fields.append(b[at:pos].decode())
            n = _U32.unpack_from(b, pos)[0]
            pos += 4
            if pos + n > len(b):
                raise IndexError
            out.append((fields[0], fields[1], fields[2], b[pos:pos + n]))
            pos += n
    except (IndexError, struct.error):
        raise ProtocolError(f"SEND_MULTI body of {len(b)} bytes truncated") from None
    except UnicodeDecodeError:
        raise ProtocolError("string field is not UTF-8") from None
    if pos != len(b):
        raise ProtocolError(f"{len(b) - pos} unexpected bytes after SEND_MULTI's messages")
    return topic, qid, out


def encode_multi_answer(queue_id: int, first_offset: int, store_ms: int, host: bytes,
                        first_phys: int, sizes: list[int], service_s: float) -> bytes:
    us = min(0xFFFFFFFF, max(0, round(service_s * 1e6)))
    return b"".join((_ANSWER.pack(queue_id, first_offset, len(sizes), store_ms, host[:4],
                                  int.from_bytes(host[4:], "big", signed=True), first_phys),
                     struct.pack(f">{len(sizes)}I", *sizes), _SERVICE.pack(us)))


def decode_multi_answer(body: bytes) -> tuple[int, int, int, str, list[int], float]:
    """(queue id, first queue offset, store ms, store host 'ip:port', each message's
    physical offset, the broker's service time s)."""
    try:
        qid, first, count, ms, ip, port, phys = _ANSWER.unpack_from(body)
        sizes = struct.unpack_from(f">{count}I", body, _ANSWER.size)
        (us,) = _SERVICE.unpack_from(body, _ANSWER.size + 4 * count)
    except struct.error:
        raise ProtocolError(f"SEND_MULTI answer of {len(body)} bytes truncated") from None
    if len(body) != _ANSWER.size + 4 * count + _SERVICE.size:
        raise ProtocolError("SEND_MULTI answer longer than its fields")
    offsets = []
    for size in sizes:
        offsets.append(phys)
        phys += size
    return qid, first, ms, f"{'.'.join(str(x) for x in ip)}:{port}", offsets, us / 1e6


def send_prefix(topic: str, queue_id: int = -1) -> bytes:
    """What goes before `encode_message` to make a SEND body."""
    return _str16(topic) + struct.pack(">i", queue_id)
