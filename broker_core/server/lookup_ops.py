"""The broker's lookup operations: QUERY_BY_KEY, VIEW_BY_ID and QUERY_BY_TIME
(PROTOCOL.md). Each answers JSON documents of messages with what an operator
asks next: is it durable here, and where each consumer group's offset stands
on its queue.
"""

from __future__ import annotations

import base64

from broker_core import protocol as p
from broker_core.errors import MessageIllegalError, MessageNotFoundError
from broker_core.message_id import MessageIdError, decode_id
from broker_core.protocol import Code
from broker_core.protocol.system_topics import DLQ_PREFIX
from broker_core.store.lookup import FOREVER_MS
from broker_core.trace.records import TRACE_TOPIC

MAX_LIMIT = 1000
BODY_CAP = 64 * 1024  # bytes of a business message's body shown; trace bodies go whole
ANSWER_BUDGET = 6 * 1024 * 1024  # under MAX_FRAME, whatever the messages weigh


def _int(req: dict, name: str, default: int, lo: int = 0, hi: int = FOREVER_MS) -> int:
    value = req.get(name, default)
    if value is None:
        return default
    if type(value) is not int or not lo <= value <= hi:
        raise p.ProtocolError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    return value


def message_doc(broker, m) -> dict:
    """One message as JSON, with its durability and the groups' offsets on its queue."""
    # whole for trace records and dead letters (an operator resends those as they are)
    whole = m.topic == TRACE_TOPIC or m.topic.startswith(DLQ_PREFIX)
    body, cap = m.body, (None if whole else BODY_CAP)
    shown = body if cap is None else body[:cap]
    try:
        text, b64 = shown.decode("utf-8"), None
    except UnicodeDecodeError:
        text, b64 = None, base64.b64encode(shown).decode("ascii")
    lo, hi = broker.store.queue_offsets(m.topic, m.queue_id)
    groups = {g: off for (g, t, q), off in broker.offsets.offsets.items()
              if t == m.topic and q == m.queue_id}
    return {
        "id": m.msg_id, "topic": m.topic, "queue_id": m.queue_id,
        "queue_offset": m.queue_offset, "tags": m.tags, "keys": m.keys,
        "properties": {k: v for k, v in m.properties.items() if k not in ("TAGS", "KEYS")},
        "born_ms": m.born_timestamp, "store_ms": m.store_timestamp,
        "store_host": m.store_host, "phys": m.physical_offset, "size": m.size,
        "body": text, "body_b64": b64, "body_bytes": len(body),
        "body_truncated": len(shown) < len(body),
        "durable": m.physical_offset + m.size <= broker.store.commitlog.flushed_offset,
        "queue_min": lo, "queue_max": hi, "groups": groups,
        "broker": broker.config.name,
    }


def _answer(broker, messages, more: bool, **extra) -> tuple[int, bytes]:
    docs, size = [], 0
    for m in messages:
        doc = message_doc(broker, m)
        size += len(m.body) * 2 + 512
        if docs and size > ANSWER_BUDGET:
            more = True
            break
        docs.append(doc)
    return Code.OK, p.encode_json({"messages": docs, "more": more,
                                   "broker": broker.config.name,
                                   "role": broker.role_name(), **extra})


async def query_by_key(broker, body: bytes) -> tuple[int, bytes]:
    req = p.decode_json(body)
    key, topic = req.get("key"), req.get("topic") or None
    if not isinstance(key, str) or (topic is not None and not isinstance(topic, str)):
        raise p.ProtocolError("QUERY_BY_KEY needs a string key (and an optional string topic)")
    begin, end = _int(req, "begin_ms", 0), _int(req, "end_ms", FOREVER_MS)
    limit = _int(req, "limit", 64, 1, MAX_LIMIT)
    try:
        found = broker.store.query_by_key(key, topic, begin, end, limit)
    except MessageIllegalError as exc:
        raise p.ProtocolError(str(exc)) from None
    return _answer(broker, found.messages, found.more, candidates=found.candidates)


async def view_by_id(broker, body: bytes) -> tuple[int, bytes]:
    req = p.decode_json(body)
    try:
        _host, phys = decode_id(req.get("id"))
    except MessageIdError as exc:
        raise p.ProtocolError(str(exc)) from None
    try:
        msg = broker.store.message_at(phys)
    except MessageNotFoundError as exc:
        return Code.MESSAGE_NOT_FOUND, str(exc).encode()
    return Code.OK, p.encode_json({"message": message_doc(broker, msg),
                                  "broker": broker.config.name})


async def query_by_time(broker, body: bytes) -> tuple[int, bytes]:
    req = p.decode_json(body)
    topic = req.get("topic")
    if not isinstance(topic, str) or not topic:
        raise p.ProtocolError("QUERY_BY_TIME needs a topic")
    begin, end = _int(req, "begin_ms", 0), _int(req, "end_ms", FOREVER_MS)
    limit = _int(req, "limit", 64, 1, MAX_LIMIT)
    found = broker.store.messages_between(topic, begin, end, limit + 1)
    return _answer(broker, found[:limit], len(found) > limit)
