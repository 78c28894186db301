"""PULL through the broker in-process: records served as stored (also across a
segment roll) and verified by the consumer's decoder, several queues in one pull,
a held pull answered once for a burst of arrivals, a small answer held for more, and
one woken after a quiet wait answered at once."""

from __future__ import annotations

import asyncio

import pytest

from broker_core import protocol as p
from broker_core.client.pulls import read_pull_answer
from broker_core.server.broker import Broker, BrokerConfig
from broker_core.server.pull_ops import MIN_BATCH

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def broker(tmp_path):
    b = Broker(BrokerConfig("b1", tmp_path / "b1", segment_bytes=64 * 1024,
                            store_extra={"max_message_bytes": 8 * 1024,
                                         "preallocate_next": False}))
    b.topics.get("orders", create=True)
    yield b
    b.close()


def send(broker, queue: int, body: bytes, topic: str = "orders") -> None:
    frame = broker.sends.send(1, p.encode_send(topic, queue, p.OutMessage(body)), 0.0, None)
    assert p.decode_header(frame).code == p.Code.OK


def pull(broker, queues, max_msgs=32, wait_ms=0, replies=None):
    """The answer's queues, now; None when it was held (its answer goes to `replies`)."""
    req = p.PullRequest("g", "orders", list(queues), max_msgs, wait_ms)
    out = broker.pulls.pull(7, p.encode_pull(req), 0.0,
                            [].append if replies is None else replies.append)
    return None if out is None else answer(out)


def answer(parts: list[bytes]):
    frame = b"".join(parts)
    header = p.decode_header(frame)
    assert header.request_id == 7 and header.length == len(frame) - p.LENGTH_SIZE
    assert header.code in (p.Code.OK, p.Code.PULL_NOT_FOUND), frame[p.HEADER_SIZE:]
    return read_pull_answer(frame[p.HEADER_SIZE:])


def test_a_pull_across_a_segment_roll_serves_both_sides_as_stored(broker):
    segments = len(broker.store.commitlog.segments)
    bodies = [bytes([i]) * 3000 for i in range(40)]  # 120 KB: two rolls at 64 KiB
    for body in bodies:
        send(broker, 0, body)
    assert len(broker.store.commitlog.segments) >= segments + 2
    ((state, msgs, corrupt),) = pull(broker, [(0, 0)], max_msgs=40)
    assert state.status == "FOUND" and corrupt == 0 and state.next_offset == 40
    assert [m.body for m in msgs] == bodies
    want = broker.store.get("orders", 0, 0, 40).messages
    assert [(m.msg_id, m.store_timestamp) for m in msgs] == \
        [(m.msg_id, m.store_timestamp) for m in want]


def test_one_pull_names_several_queues_and_the_answer_is_bounded_in_their_order(broker):
    for q in range(3):
        for i in range(5):
            send(broker, q, f"{q}-{i}".encode())
    got = pull(broker, [(2, 0), (0, 3), (1, 0)], max_msgs=7)
    assert [(s.queue_id, s.status, s.count) for s, _m, _c in got] == \
        [(2, "FOUND", 5), (0, "FOUND", 2), (1, "NOT_READ", 0)]
    assert [m.body for _s, msgs, _c in got for m in msgs] == \
        [b"2-0", b"2-1", b"2-2", b"2-3", b"2-4", b"0-3", b"0-4"]
    assert got[2][0].next_offset == 0  # not read: asked again from where it was


def test_a_held_pull_is_answered_once_for_a_burst_of_arrivals(broker):
    async def main():
        replies: list[list[bytes]] = []
        assert pull(broker, [(0, 0), (1, 0)], wait_ms=5000, replies=replies) is None
        assert broker.pulls.held == 1
        for i in range(3):  # a burst, on two of its queues
            send(broker, i % 2, f"m{i}".encode())
        assert not replies  # not per arrival: the batch's timer answers it
        while not replies:
            await asyncio.sleep(0.001)
        got = answer(replies[0])
        assert sorted(m.body for _s, msgs, _c in got for m in msgs) == [b"m0", b"m1", b"m2"]
        await asyncio.sleep(broker.pulls.hold_s * 3)
        assert len(replies) == 1 and broker.pulls.held == 0

    asyncio.run(main())


def test_a_wide_pull_is_held_per_topic_and_woken_by_any_of_its_queues_only(broker):
    from broker_core.server.pull_ops import NARROW

    broker.topics.put("orders", 64)
    wide = [(q, 0) for q in range(NARROW + 16)]  # a consumer's share of a wide topic

    async def main():
        replies: list[list[bytes]] = []
        assert pull(broker, wide, wait_ms=5000, replies=replies) is None
        send(broker, NARROW + 20, b"elsewhere")  # a queue it did not name
        await asyncio.sleep(broker.pulls.hold_s * 3)
        assert not replies and broker.pulls.held == 1
        send(broker, NARROW + 3, b"mine")
        while not replies:
            await asyncio.sleep(0.001)
        got = answer(replies[0])
        assert [m.body for _s, msgs, _c in got for m in msgs] == [b"mine"]
        assert broker.pulls.held == 0 and not broker.pulls.sessions.by_topic  # nothing left

    asyncio.run(main())


def test_a_woken_wide_pull_answers_what_was_behind_and_what_arrived_in_its_order(broker):
    """Woken by arrivals, a wide pull reads the queues behind when it came in and those
    a message arrived in since (not all it names again), in the pull's own order."""
    from broker_core.server.pull_ops import NARROW

    broker.topics.put("orders", 64)
    order = list(range(10, NARROW + 26)) + list(range(10))  # a consumer's rotated share
    send(broker, 12, b"behind")  # there before the pull: too few to answer at once
    wide = [(q, 7 if q == 30 else 0) for q in order]  # queue 30: an offset past its end

    async def main():
        replies: list[list[bytes]] = []
        assert pull(broker, wide, wait_ms=5000, replies=replies) is None
        send(broker, 3, b"first")
        send(broker, 25, b"second")
        while not replies:
            await asyncio.sleep(0.001)
        got = answer(replies[0])
        assert [(s.queue_id, s.status, [m.body for m in msgs]) for s, msgs, _c in got] == [
            (12, "FOUND", [b"behind"]), (25, "FOUND", [b"second"]),
            (30, "OFFSET_OVERFLOW", []), (3, "FOUND", [b"first"])]

    asyncio.run(main())


def test_a_pull_woken_after_a_quiet_wait_is_answered_at_once_a_busy_one_after_the_hold(
        tmp_path):
    """A pull whose first arrival came a hold or more after it was held is on a stream
    too sparse to batch: answered at the loop's next turn. One woken sooner waits for
    the batch's timer (the time is the broker's monotonic clock, driven here)."""
    now = [1000.0]
    b = Broker(BrokerConfig("b1", tmp_path / "b1", store_extra={"preallocate_next": False}),
               monotonic=lambda: now[0])
    b.topics.get("orders", create=True)

    async def main():
        quiet: list[list[bytes]] = []
        busy: list[list[bytes]] = []
        assert pull(b, [(0, 0)], wait_ms=5000, replies=quiet) is None
        now[0] += 2 * b.pulls.hold_s  # holds passed with nothing for it
        assert pull(b, [(1, 0)], wait_ms=5000, replies=busy) is None  # held just now
        send(b, 0, b"sparse")
        send(b, 1, b"stream")
        await asyncio.sleep(0)
        assert len(quiet) == 1 and not busy  # the quiet one at once; the other holds
        ((_s, msgs, _c),) = answer(quiet[0])
        assert [m.body for m in msgs] == [b"sparse"]
        while not busy:
            await asyncio.sleep(0.001)
        ((_s, msgs, _c),) = answer(busy[0])
        assert [m.body for m in msgs] == [b"stream"]
        assert b.pulls.held == 0

    try:
        asyncio.run(main())
    finally:
        b.close()


def test_a_pull_that_would_bring_few_waits_for_more_a_full_one_does_not(broker):
    async def main():
        send(broker, 0, b"early")
        replies: list[list[bytes]] = []
        assert pull(broker, [(0, 0)], wait_ms=5000, replies=replies) is None  # 1 < MIN_BATCH
        send(broker, 0, b"late")
        while not replies:
            await asyncio.sleep(0.001)
        ((_s, msgs, _c),) = answer(replies[0])
        assert [m.body for m in msgs] == [b"early", b"late"]
        for _i in range(MIN_BATCH):
            send(broker, 1, b"x")
        assert pull(broker, [(1, 0)], wait_ms=5000) is not None  # enough: at once
        assert pull(broker, [(0, 0)], wait_ms=0) is not None  # no wait asked: at once

    asyncio.run(main())


def test_a_held_pull_times_out_empty_and_shutdown_answers_the_rest(broker):
    async def main():
        replies: list[list[bytes]] = []
        pull(broker, [(0, 0)], wait_ms=100, replies=replies)
        pull(broker, [(1, 0)], wait_ms=60_000, replies=replies)
        while not replies:
            await asyncio.sleep(0.01)
        ((state, msgs, _c),) = answer(replies[0])
        assert state.status == "NO_NEW_MSG" and not msgs
        broker.pulls.answer_all()
        assert len(replies) == 2 and broker.pulls.held == 0

    asyncio.run(main())
