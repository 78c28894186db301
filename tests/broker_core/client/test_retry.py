"""The retry schedule and how a retried message shows itself (client.retry)."""

from __future__ import annotations

from broker_core.client.retry import (
    PROP_ORIGIN_TOPIC,
    PROP_RETRY_TIMES,
    as_first_sent,
    dead_letter_resend,
    dlq_topic,
    retry_delay,
    retry_times,
    retry_topic,
)
from broker_core.protocol.record import Message


def message(topic: str, **props) -> Message:
    return Message(topic, 0, 5, b"x", None, None, 0, 0, 42, 100, dict(props))


def test_retries_wait_longer_each_time_from_10_s_up_to_2_h():
    assert [retry_delay(n) for n in range(1, 6)] == ["10s", "30s", "1m", "2m", "3m"]
    assert retry_delay(16) == "2h" and retry_delay(40) == "2h"
    assert (retry_topic("billing"), dlq_topic("billing")) == ("%RETRY%billing", "%DLQ%billing")


def test_a_retried_message_shows_its_first_topic_and_count():
    m = message("%RETRY%billing", **{PROP_ORIGIN_TOPIC: "orders", PROP_RETRY_TIMES: "2"})
    shown = as_first_sent(m)
    assert (shown.topic, retry_times(shown), shown.queue_offset) == ("orders", 2, 5)
    plain = message("orders")
    assert as_first_sent(plain) is plain and retry_times(plain) == 0


def test_a_dead_letter_resent_by_hand_goes_to_its_first_topic_as_a_new_send():
    props = {PROP_ORIGIN_TOPIC: "orders", PROP_RETRY_TIMES: "16", "COPY_OF": "7F00",
             "ORIGIN_MSG_ID": "7F01", "TRACE": "1"}
    assert dead_letter_resend(props) == ("orders", {"ORIGIN_MSG_ID": "7F01", "TRACE": "1"})
    assert props[PROP_RETRY_TIMES] == "16"  # the dead letter's own, as stored
    assert dead_letter_resend({"TRACE": "1"}) == ("", {"TRACE": "1"})
