"""Consumer retry and the dead-letter queue (RocketMQ's CONSUMER_SEND_MSG_BACK, done
as RocketMQ's client does when the broker cannot: a send).

A message a consumer of group G fails is sent again, as it was, to `%RETRY%G`
through the delayed path (level 3 + the times it was retried: 10 s, 30 s, 1 m, 2 m
...), with how many times it was retried, its first topic and its first id in its
properties; G's consumers subscribe `%RETRY%G` beside their topic, so only G sees
it again, and the failed message never blocks the rest of its queue (the consumer
commits past it once it is sent back). Past `max_reconsume` tries it goes to
`%DLQ%G` instead, which no consumer reads by default: `floodgate dlq` shows and
resends it.
"""

from __future__ import annotations

import dataclasses

from broker_core.protocol.delay import LABELS, PROP_DELAY
from broker_core.protocol.system_topics import (
    DLQ_PREFIX,
    PROP_COPY_OF,
    PROP_ORIGIN_ID,
    PROP_ORIGIN_TOPIC,
    PROP_RETRY_TIMES,
    RETRY_FIRST_LEVEL,
    RETRY_PREFIX,
)

MAX_RECONSUME = 16  # RocketMQ's default maxReconsumeTimes
FIRST_LEVEL = RETRY_FIRST_LEVEL  # a first retry waits level 3 (10 s), then one more a time


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group


def retry_delay(times: int) -> str:
    """The delay of the `times`-th retry (1-based), as a level label."""
    return LABELS[min(FIRST_LEVEL + times - 1, len(LABELS)) - 1]


def send_back(producer, group: str, message, delay: str | float | None = None,
              max_reconsume: int = MAX_RECONSUME, wait: bool = True):
    """Send a failed message back for `group`: "retry" (to %RETRY%group, delayed) or
    "dlq" (past max_reconsume tries). Raises SendFailed when it could not be sent (the
    caller must not commit past the message then). `wait=False`: (that word, a Future
    of the send) without waiting for it."""
    props = dict(message.properties or {})
    times = int(props.get(PROP_RETRY_TIMES, "0") or 0) + 1
    for key in ("TAGS", "KEYS", PROP_DELAY, "REAL_TOPIC", "REAL_QID", "PGROUP", PROP_COPY_OF):
        props.pop(key, None)
    props[PROP_RETRY_TIMES] = str(times)
    props.setdefault(PROP_ORIGIN_TOPIC, message.topic)
    props.setdefault(PROP_ORIGIN_ID, message.msg_id)
    send = producer.send if wait else producer.send_async
    if times > max_reconsume:
        out = send(dlq_topic(group), message.body, message.tags, message.keys, props)
        return "dlq" if wait else ("dlq", out)
    out = send(retry_topic(group), message.body, message.tags, message.keys, props,
               delay=delay if delay is not None else retry_delay(times))
    return "retry" if wait else ("retry", out)


def dead_letter_resend(properties: dict[str, str]) -> tuple[str, dict[str, str]]:
    """(the topic it was first sent to, the properties to send it with) of a dead letter
    sent back by hand: a new send, so neither its retry count nor a copy's COPY_OF goes
    with it; "" when it does not say where it came from."""
    props = dict(properties)
    topic = props.pop(PROP_ORIGIN_TOPIC, "")
    props.pop(PROP_RETRY_TIMES, None)
    props.pop(PROP_COPY_OF, None)
    return topic, props


def as_first_sent(message):
    """A message read from a retry topic, shown with the topic it was first sent to."""
    origin = (message.properties or {}).get(PROP_ORIGIN_TOPIC)
    if origin and message.topic.startswith(RETRY_PREFIX):
        return dataclasses.replace(message, topic=origin)
    return message


def retry_times(message) -> int:
    return int((message.properties or {}).get(PROP_RETRY_TIMES, "0") or 0)
