"""The consumer's offsets against a real broker: a commit stores the offset past the
last message handed out (not past what was fetched ahead), a member that takes the
group over starts there, and what was polled but never committed comes again
(at-least-once: nothing is lost, whoever crashed)."""

from __future__ import annotations

import pytest

from broker_core.client.consumer import Consumer
from broker_core.client.producer import Producer
from broker_core.protocol import Op, decode_json, encode_json

pytestmark = pytest.mark.timeout(60)

TOPIC = "orders"


def produce(addr: str, n: int) -> set[bytes]:
    bodies = {f"order-{i}".encode() for i in range(n)}
    with Producer({"b1": addr}, retries=0) as producer:
        for body in sorted(bodies):
            producer.send(TOPIC, body)
    return bodies


def poll_all(consumer: Consumer, want: int, limit: int = 32) -> list[bytes]:
    got: list[bytes] = []
    for _ in range(200):
        got += [m.body for m in consumer.poll(max_msgs=limit, timeout=0.2)]
        if len(got) >= want:
            break
    return got


def committed(consumer: Consumer, group: str) -> dict[int, int]:
    """The broker's stored offset per queue of the topic (-1: none)."""
    out = {}
    for broker, qid in consumer.assignment:
        code, body = consumer._pool.get(broker).call(Op.QUERY_OFFSET, encode_json(
            {"group": group, "topic": TOPIC, "queue_id": qid}), timeout=5)
        out[qid] = int(decode_json(body)["offset"])
    return out


def test_a_commit_covers_what_was_handed_out_and_the_next_owner_starts_there(broker_addr):
    sent = produce(broker_addr, 40)
    first = Consumer("billing", TOPIC, {"b1": broker_addr})
    handed = poll_all(first, 10, limit=10)[:10]
    assert len(handed) == 10
    first.commit()
    stored = committed(first, "billing")
    assert sum(max(o, 0) for o in stored.values()) == 10  # not what was fetched ahead
    first.close()

    second = Consumer("billing", TOPIC, {"b1": broker_addr})
    rest = poll_all(second, 30)
    second.close()
    assert sorted(rest) == sorted(sent - set(handed))  # each once, none lost


def test_what_was_polled_and_not_committed_comes_again_after_a_crash(broker_addr):
    sent = produce(broker_addr, 20)
    crashed = Consumer("audit", TOPIC, {"b1": broker_addr}, client_id="host-1")
    assert len(poll_all(crashed, 8, limit=8)) >= 8
    crashed._pool.close()  # gone without commit or leave: what a SIGKILL leaves

    # back under the same id (a new id would wait out the dead member's heartbeats
    # before its queues are handed on)
    after = Consumer("audit", TOPIC, {"b1": broker_addr}, client_id="host-1")
    again = poll_all(after, 20)
    after.close()
    assert set(again) == sent


def test_another_group_keeps_offsets_of_its_own(broker_addr):
    sent = produce(broker_addr, 12)
    with Consumer("one", TOPIC, {"b1": broker_addr}) as one:
        assert len(poll_all(one, 12)) == 12
    with Consumer("two", TOPIC, {"b1": broker_addr}) as two:  # closing commits
        assert set(poll_all(two, 12)) == sent
        assert sum(committed(two, "one").values()) == 12
