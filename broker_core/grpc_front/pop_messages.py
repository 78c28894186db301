"""A stored message as a RocketMQ 5 client receives it, and a subscription's tag filter."""

from __future__ import annotations

import zlib

from google.protobuf import duration_pb2, timestamp_pb2

from broker_core.grpc_front import rocketmq_v2_pb2 as pb

# what RocketMQ 5 says in its system properties, kept out of the user's
# (and a transaction's: its half's flag and group, the committed copy's half)
SYSTEM = frozenset({"TAGS", "KEYS", "UNIQ_KEY", "MESSAGE_GROUP", "DELAY", "REAL_TOPIC",
                    "REAL_QID", "TRAN_MSG", "PGROUP", "COPY_OF", "TRACE"})


def as_pb(m, receipt: str, attempt: int, invisible_s: float, broker: str) -> pb.Message:
    props = m.properties or {}
    group = props.get("MESSAGE_GROUP")
    sp = pb.SystemProperties(
        keys=(m.keys or "").split(), message_id=props.get("UNIQ_KEY") or m.msg_id,
        body_digest=pb.Digest(type=pb.CRC32, checksum=f"{zlib.crc32(m.body):08X}"),
        body_encoding=pb.IDENTITY, message_type=pb.FIFO if group else pb.NORMAL,
        born_timestamp=_ts(m.born_timestamp), born_host="", store_host=broker,
        store_timestamp=_ts(m.store_timestamp), receipt_handle=receipt, queue_id=m.queue_id,
        queue_offset=m.queue_offset, delivery_attempt=attempt,
        invisible_duration=duration_pb2.Duration(seconds=int(invisible_s),
                                                 nanos=int(invisible_s % 1 * 1e9)))
    if m.tags:
        sp.tag = m.tags
    if group:
        sp.message_group = group
    return pb.Message(topic=pb.Resource(name=m.topic), body=m.body, system_properties=sp,
                      user_properties={k: v for k, v in props.items() if k not in SYSTEM})


def tag_filter(expr: pb.FilterExpression):
    """A TAG expression ("*", "a", "a || b") as a predicate on a message's tag; SQL is
    refused earlier (not served)."""
    text = expr.expression.strip()
    if not text or text == "*":
        return lambda _tag: True
    tags = {t.strip() for t in text.split("||") if t.strip()}
    return lambda tag: tag in tags


def _ts(ms: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=ms // 1000, nanos=ms % 1000 * 1_000_000)
