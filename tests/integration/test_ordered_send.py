"""Ordered sends against four real brokers: a key's messages all in one queue in send
order; its broker isolated by the fuse fails them (or moves them on when allowed);
released, they go back to their own queue."""

from __future__ import annotations

import pytest

from broker_core.client.attempts import SendFailed
from broker_core.client.connection import Connection
from broker_core.client.producer import Producer
from broker_core.cluster.readback import read_queue_bodies

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def isolate(producer: Producer, broker: str) -> None:
    for _ in range(200):  # errors, as the producer itself would report them
        if broker in producer.fuse.excluded:
            return
        producer.fuse.report(broker, 0.001, ok=False)
    raise AssertionError(f"the fuse did not isolate {broker}")


def test_a_keys_messages_stay_in_one_queue_in_order_and_are_never_moved_silently(
        cluster_factory):
    cluster = cluster_factory(n=4)
    addrs = cluster.file.addrs
    with Producer(addrs) as producer:
        where: dict[str, set] = {}
        for i in range(400):
            key = f"order-{i % 25}"
            r = producer.send("orders", f"{key}:{i}".encode(), order_key=key)
            where.setdefault(key, set()).add((r.broker, r.queue_id))
        assert all(len(q) == 1 for q in where.values()), where
        assert len({q for qs in where.values() for q in qs}) > 4  # spread over queues
        for key, ((broker, qid),) in where.items():
            conn = Connection(addrs[broker])
            try:
                seqs = [int(b.split(b":")[1]) for b in read_queue_bodies(conn, "orders", qid)
                        if b.startswith(f"{key}:".encode())]
            finally:
                conn.close()
            assert seqs == sorted(seqs) and len(seqs) == 16, (key, seqs)

        key = "order-3"
        (own,) = where[key]
        isolate(producer, own[0])
        with pytest.raises(SendFailed, match="ORDER_QUEUE_UNAVAILABLE"):
            producer.send("orders", b"x", order_key=key)
        moved = producer.send("orders", b"y", order_key=key, allow_reorder=True)
        assert moved.broker != own[0]
        unrelated = next(k for k, ((b, _q),) in where.items() if b != own[0])
        r = producer.send("orders", b"z", order_key=unrelated)  # other keys unaffected
        assert (r.broker, r.queue_id) in where[unrelated]
    with Producer(addrs) as fresh:  # a new fuse: the broker is back, so is the key
        r = fresh.send("orders", b"w", order_key=key)
        assert (r.broker, r.queue_id) == own


def test_the_async_producer_sends_a_key_to_the_same_queue(cluster_factory):
    import asyncio

    from broker_core.client.aio_producer import AsyncProducer

    cluster = cluster_factory(n=2)

    async def run() -> dict[str, set]:
        where: dict[str, set] = {}
        async with AsyncProducer(cluster.file.addrs) as producer:
            results = await asyncio.gather(*(
                producer.send("orders", b"m%d" % i, order_key=f"k{i % 10}")
                for i in range(200)))
        for i, r in enumerate(results):
            where.setdefault(f"k{i % 10}", set()).add((r.broker, r.queue_id))
        return where

    where = asyncio.run(run())
    assert all(len(q) == 1 for q in where.values()) and len(where) == 10
