"""What a RocketMQ consumer holds survives a restart of its broker: the state of pop
(grpc_front.pop) is saved with the broker's tables, so a message handed out and not
acknowledged stays invisible until its time, and one acknowledged is not handed out
again."""

from __future__ import annotations

import pytest

from tests.integration.rocketmq_client_calls import (
    _consumer,
    _receive_all,
    _send,
    grpc_broker,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_a_restarted_broker_keeps_what_its_consumers_hold(tmp_path_factory):
    from broker_core.client import admin

    data = tmp_path_factory.mktemp("kept")
    first = grpc_broker(tmp_path_factory, "--queues", "1", data=data)
    broker = next(first)
    try:
        _send(broker, "tasks", [{"body": b"held"}, {"body": b"done"}])
        consumer = _consumer(broker, "doers", "tasks")
        try:
            got = _receive_all(consumer, 2, invisible_s=300, ack=False)
            assert sorted(m.body for m in got) == [b"done", b"held"]
            consumer.ack(next(m for m in got if m.body == b"done"))
        finally:
            consumer.shutdown()
    finally:
        next(first, None)  # SIGTERM: the broker saves its tables as it stops

    again = grpc_broker(tmp_path_factory, "--queues", "1", data=data)
    broker = next(again)
    try:
        _send(broker, "tasks", [{"body": b"new"}])
        consumer = _consumer(broker, "doers", "tasks")
        try:
            # (one queue: a message visible again would come first in the same batch)
            assert [m.body for m in _receive_all(consumer, 1)] == [b"new"]
        finally:
            consumer.shutdown()
        doc = admin.offsets(broker["http"], query={"group": "doers", "topic": "tasks"})
        assert [q["in_flight"] for q in doc["queues"]] == [1]  # "held", out till its time
    finally:
        next(again, None)
