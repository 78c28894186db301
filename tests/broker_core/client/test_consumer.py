"""The consumer's offsets against a real broker: a commit stores the offset past the
last message handed out (not past what was fetched ahead), a member that takes the
group over starts there, and what was polled but never committed comes again
(at-least-once: nothing is lost, whoever crashed)."""

from __future__ import annotations

import time

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


def test_a_queue_whose_traffic_starts_is_not_read_after_all_that_was_fetched_ahead(
        broker_addr):
    """A consumer slower than its producers holds hundreds of one queue's messages
    fetched ahead. Messages arriving in its other queues are handed out at their turn,
    not after all of those: the broker would see those queues still and call the group
    STALLED there (`make demo`'s warehouse, behind, when a group came back to routing)."""
    with Producer({"b1": broker_addr}, retries=0) as producer:
        for i in range(400):
            producer.send(TOPIC, f"busy-{i}".encode(), order_key="busy")
        consumer = Consumer("slow", TOPIC, {"b1": broker_addr})
        handed: list[bytes] = []
        for _ in range(10):  # fetched ahead as far as the buffer goes
            handed += [m.body for m in consumer.poll(max_msgs=1, timeout=0.2)]
        busy_queue = producer.send(TOPIC, b"busy-400", order_key="busy").queue_id
        late = 0
        while late < 12:  # spread over the queues: most land in the others
            late += producer.send(TOPIC, f"late-{late}".encode()).queue_id != busy_queue
    for _ in range(60):
        handed += [m.body for m in consumer.poll(max_msgs=8, timeout=0.5)]
        if any(b.startswith(b"late") for b in handed):
            break
        time.sleep(0.05)  # processing them: slower than the producer
    consumer.close()
    first_late = next(i for i, b in enumerate(handed) if b.startswith(b"late"))
    assert first_late < 128, handed[:first_late + 1]  # at its turn, not after the 256 ahead


def test_a_group_whose_retries_no_broker_would_take_is_refused_before_it_consumes(broker_addr):
    """%RETRY%<group> must be a legal topic: otherwise the group would consume and commit
    and its first nack would fail, its message already past its offset."""
    produce(broker_addr, 3)
    with pytest.raises(ValueError, match="illegal consumer group name 'a b'"):
        Consumer("a b", TOPIC, {"b1": broker_addr})
    with pytest.raises(ValueError, match="illegal topic name 'orders.eu'"):  # never any message
        Consumer("g", "orders.eu", {"b1": broker_addr})
    with Consumer("g", TOPIC, {"b1": broker_addr}) as c:  # nor a poll that could get none
        for bad in ({"max_msgs": 0}, {"max_msgs": -5}, {"timeout": float("nan")}):
            with pytest.raises(ValueError, match="poll takes max_msgs >= 1 and a timeout"):
                c.poll(**bad)
        assert len(poll_all(c, 3)) == 3 and c.poll(timeout=-0.1) == []  # a deadline passed
    with Consumer("x" * 120, TOPIC, {"b1": broker_addr}) as longest:  # room for %RETRY%
        got = []
        for _ in range(100):
            got += longest.poll(max_msgs=32, timeout=0.2)
            if len(got) >= 3:
                break
        assert len(got) == 3 and longest.nack(got[0])  # its retry topic, 127 characters, is taken


def test_a_commit_that_waits_not_rides_the_next_pull_with_no_request_of_its_own(broker_addr):
    """`commit(wait=False)`: the offsets go with the next pull to the broker (as RocketMQ's
    pull carries its commit offset); stored once the broker took that pull, within
    RIDE_WAIT_S even when the pull in flight is held for a caught-up queue."""
    from broker_core.client.pulls import RIDE_WAIT_S

    produce(broker_addr, 20)
    consumer = Consumer("billing", TOPIC, {"b1": broker_addr})
    try:
        assert len(poll_all(consumer, 20)) == 20
        consumer.commit(wait=False)
        assert sum(max(o, 0) for o in committed(consumer, "billing").values()) == 0
        started = time.monotonic()
        while sum(max(o, 0) for o in committed(consumer, "billing").values()) < 20:
            consumer.poll(timeout=0.1)  # a held pull is given up and asked again
            assert time.monotonic() - started < RIDE_WAIT_S + 5
    finally:
        consumer.close()


def test_reading_from_followers_is_asked_by_name_and_needs_routes(broker_addr):
    with pytest.raises(ValueError, match="read_from is 'master' or 'follower', not 'slave'"):
        Consumer("g", TOPIC, {"b1": broker_addr}, read_from="slave")
    with pytest.raises(ValueError, match="needs routes"):
        Consumer("g", TOPIC, {"b1": broker_addr}, read_from="follower")
