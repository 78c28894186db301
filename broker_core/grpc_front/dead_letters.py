"""Dead letters of RocketMQ consumers on the gRPC port: a message handed out its last
time (`--grpc-max-deliveries`) and failed again, or one a PushConsumer forwards
(ForwardMessageToDeadLetterQueue), goes to `%DLQ%GROUP` as a native consumer's
send-back does past its retries (client.retry): its origin topic and id and the times it
was retried in its properties; `floodgate dlq` shows and resends it."""

from __future__ import annotations

import logging

from broker_core.grpc_front import rocketmq_v2_pb2 as pb
from broker_core.protocol import STORED_CODES, Code
from broker_core.protocol.codecs import OutMessage, encode_send
from broker_core.protocol.record import PROP_KEYS, PROP_TAGS
from broker_core.protocol.system_topics import (
    DLQ_PREFIX,
    PROP_ORIGIN_ID,
    PROP_ORIGIN_TOPIC,
    PROP_RETRY_TIMES,
)

log = logging.getLogger("floodgate.grpc")


async def dead_letter(front, group: str, m) -> bool:
    """Store `m` in the group's dead-letter queue through the broker's SEND path; False
    when that refused it (it stays where it was and comes back after its time)."""
    props = {k: v for k, v in (m.properties or {}).items() if k not in (PROP_TAGS, PROP_KEYS)}
    props.update({PROP_RETRY_TIMES: str(front.broker.config.grpc_max_deliveries - 1),
                  PROP_ORIGIN_TOPIC: m.topic, PROP_ORIGIN_ID: m.msg_id})
    code, answer = await front.native_send(encode_send(
        DLQ_PREFIX + group, 0, OutMessage(m.body, m.tags or "", m.keys or "", props)))
    if code not in STORED_CODES:
        log.warning("gRPC consumer group %s: %s queue %d offset %d not dead-lettered: %s",
                    group, m.topic, m.queue_id, m.queue_offset,
                    answer.decode("utf-8", "replace") or Code(code).name)
    return code in STORED_CODES


async def forward(front, req: pb.ForwardMessageToDeadLetterQueueRequest
                  ) -> pb.ForwardMessageToDeadLetterQueueResponse:
    """The message a live receipt handle names, to the DLQ, and acknowledged."""
    group, topic, receipt = req.group.name, req.topic.name, req.receipt_handle
    m = front.pops.held(group, topic, receipt)
    if m is None:
        return _answer(pb.INVALID_RECEIPT_HANDLE,
                       "acknowledged already, or handed out again since")
    if not await dead_letter(front, group, m):
        return _answer(pb.INTERNAL_SERVER_ERROR, f"%DLQ%{group} refused it")
    front.pops.ack(group, topic, receipt)
    return _answer(pb.OK, "OK")


def _answer(code: int, message: str) -> pb.ForwardMessageToDeadLetterQueueResponse:
    return pb.ForwardMessageToDeadLetterQueueResponse(status=pb.Status(code=code,
                                                                       message=message))
