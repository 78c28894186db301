"""A message RocketMQ's SimpleConsumer never acknowledges is not handed out for ever: past
`--grpc-max-deliveries` it goes to `%DLQ%GROUP`, as a native consumer's send-back does
past its retries, with its origin, and the queue moves on."""

from __future__ import annotations

import time

import pytest

from tests.integration.rocketmq_client_calls import _consumer, _send, grpc_broker
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    yield from grpc_broker(tmp_path_factory, "--grpc-max-deliveries", "2", "--queues", "1")


def test_a_message_never_acknowledged_goes_to_the_dead_letter_queue(broker):
    from broker_core.client import admin
    from broker_core.protocol.system_topics import PROP_ORIGIN_TOPIC

    (poison,) = _send(broker, "jobs", [{"body": b"poison", "keys": "job-1"}])
    consumer = _consumer(broker, "workers", "jobs")
    try:
        handed = []
        deadline = time.monotonic() + 30
        while len(handed) < 2 and time.monotonic() < deadline:
            handed += consumer.receive(16, 1)  # never acknowledged: back after 1 s
        assert [m.body for m in handed] == [b"poison", b"poison"]
        assert [m.delivery_attempt for m in handed] == [1, 2]
        _send(broker, "jobs", [{"body": b"after"}])  # the queue moves on past it
        after = []

        def dead_lettered():
            for m in consumer.receive(16, 30):
                assert m.body == b"after"  # never a third poison
                after.append(m)
                consumer.ack(m)
            # (as `floodgate dlq` reads a group's dead letters: by time)
            return after and admin.query_by_time(_native(broker), "%DLQ%workers", 0,
                                                 int(time.time() * 1000) + 1)["messages"]

        found = wait_for(dead_lettered, 20, "the poison dead-lettered, the next handed out")
    finally:
        consumer.shutdown()
    assert [(m["body"], m["keys"]) for m in found] == [("poison", "job-1")]
    props = found[0]["properties"]
    assert (props[PROP_ORIGIN_TOPIC], props["UNIQ_KEY"]) == ("jobs", poison)


def _native(broker) -> str:
    host, port = broker["grpc"].rsplit(":", 1)
    return f"{host}:{int(port) - 2}"
