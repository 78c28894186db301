"""An orderly consumer's failed message, retried in place (client.orderly): the pause,
the count of tries, the dead letter, and a dead letter that could not be sent. The
whole path against brokers is in tests/integration/test_orderly_consume."""

from __future__ import annotations

import pytest

from broker_core.client.orderly import SUSPEND_S, InPlaceRetries
from broker_core.client.pool import ConnectionPool
from broker_core.client.pulls import DownList, Pulls
from broker_core.client.retry import PROP_RETRY_TIMES
from broker_core.errors import BrokerError
from broker_core.protocol.record import Message

QUEUE = ("broker-1", 2)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def message(offset: int) -> Message:
    return Message(topic="orders", queue_id=QUEUE[1], queue_offset=offset, body=b"x",
                   tags=None, keys=None, store_timestamp=0, born_timestamp=0,
                   physical_offset=offset * 100, size=100, properties={"KEYS": "k"})


@pytest.fixture
def parts():
    clock = Clock()
    pulls = Pulls("g", "orders", ConnectionPool({}), None, DownList(clock), 1.0, clock,
                  lambda q: True)
    sent: list[Message] = []
    refuse = []

    def send_back(m: Message) -> str:
        if refuse:
            raise BrokerError("broker-1: SYSTEM_ERROR: down")
        sent.append(m)
        return "dlq"

    retries = InPlaceRetries(2, pulls, send_back, clock)
    return clock, pulls, retries, sent, refuse


def test_a_failed_message_comes_again_from_its_offset_after_the_pause(parts):
    clock, pulls, retries, sent, _refuse = parts
    pulls.offsets[QUEUE], pulls.delivered[QUEUE] = 40, 40  # fetched ahead past it
    assert retries.failed(QUEUE, message(37)) == "retry"
    assert (pulls.offsets[QUEUE], pulls.delivered[QUEUE]) == (37, 37)
    assert retries.waiting(QUEUE) and not retries.waiting(("broker-1", 3))
    clock.now += SUSPEND_S
    assert not retries.waiting(QUEUE)
    assert sent == []


def test_past_its_tries_it_goes_to_the_dead_letter_queue_spent(parts):
    clock, _pulls, retries, sent, _refuse = parts
    m = message(37)
    assert [retries.failed(QUEUE, m) for _ in range(3)] == ["retry", "retry", "dlq"]
    assert [s.queue_offset for s in sent] == [37]
    assert sent[0].properties == {"KEYS": "k", PROP_RETRY_TIMES: "2"}  # send_back adds one
    assert retries.failed(QUEUE, m) == "retry"  # counted afresh: its tries were forgotten


def test_a_dead_letter_not_sent_is_tried_again_after_the_pause(parts):
    clock, _pulls, retries, sent, refuse = parts
    m = message(37)
    retries.failed(QUEUE, m), retries.failed(QUEUE, m)
    refuse.append(True)
    assert retries.failed(QUEUE, m) == "retry"  # not lost: its queue waits on it
    assert retries.waiting(QUEUE)
    refuse.clear()
    assert retries.failed(QUEUE, m) == "dlq"
    assert len(sent) == 1


def test_a_message_handled_forgets_its_failures(parts):
    _clock, _pulls, retries, sent, _refuse = parts
    m = message(37)
    retries.failed(QUEUE, m), retries.failed(QUEUE, m)
    retries.done(QUEUE, m)
    assert retries.failed(QUEUE, m) == "retry"
    assert sent == []
