"""A pull far behind the head: its records read from the disk in a worker thread first,
then answered whole and in order; one at the head answered at once on the loop."""

from __future__ import annotations

import asyncio

import pytest

from broker_core import protocol as p
from broker_core.server.broker import Broker, BrokerConfig
from tests.broker_core.server.test_pull_ops import answer, send

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def broker(tmp_path):
    b = Broker(BrokerConfig("b1", tmp_path / "b1", segment_bytes=1 << 20,
                            store_extra={"max_message_bytes": 8 * 1024,
                                         "preallocate_next": False}))
    b.topics.put("orders", 64)
    yield b
    b.close()


def test_a_pull_far_behind_is_read_off_the_loop_then_answered_whole(broker):
    bodies = {q: [f"{q}-{i}".encode() * 50 for i in range(3)] for q in range(40)}
    for i in range(3):
        for q in range(40):
            send(broker, q, bodies[q][i])
    cold = broker.pulls.cold

    async def main():
        replies: list[list[bytes]] = []
        req = p.PullRequest("g", "orders", [(q, 0) for q in range(40)], 1024, 0,
                            session=5, epoch=0)
        cold.cold_bytes = broker.store.commitlog.write_offset  # only the very first is far
        assert broker.pulls.pull(7, p.encode_pull(req), 0.0, replies.append) is not None
        cold.cold_bytes = 0  # now every record is "far behind"
        req.epoch, req.queues = 1, []
        assert broker.pulls.pull(7, p.encode_pull(req), 0.0, replies.append) is None
        assert not replies  # its pages are read in the worker first
        while not replies:
            await asyncio.sleep(0.001)
        assert cold.warmed == 1
        got = {s.queue_id: [m.body for m in msgs] for s, msgs, _c in answer(replies[0])}
        assert got == bodies  # every queue, each in its order

    asyncio.run(main())


def test_at_the_head_no_read_ahead(broker):
    send(broker, 0, b"fresh")
    assert broker.pulls.cold.ranges("orders", [(0, 0)], 32) == []
    broker.pulls.cold.cold_bytes = 0
    assert broker.pulls.cold.ranges("orders", [(0, 0)], 32) != []
    assert broker.pulls.cold.ranges("orders", [(0, 1)], 32) == []  # caught up: nothing
