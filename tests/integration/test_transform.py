"""Consume-transform-produce exactly once through a real broker process: every input
message's output is read once, in its queue's order; a zombie transform whose queue
moved is fenced and its halves rolled back; a transform killed between its halves and
its commit leaves nothing visible, and its input is transformed again by the next."""

from __future__ import annotations

import time

import pytest

from broker_core.client.consumer import Consumer
from broker_core.client.producer import Producer
from broker_core.client.transform import Transform
from broker_core.protocol import Op, decode_json, encode_json
from broker_core.protocol.transactions import PROP_CONSUMED_FROM

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def upper(m):
    return m.body.upper()


def read_all(addrs, topic: str, want: int, timeout: float = 20.0) -> list:
    got, deadline = [], time.monotonic() + timeout
    with Consumer("reader", topic, addrs) as c:
        while len(got) < want and time.monotonic() < deadline:
            got += c.poll(64, timeout=0.1)
        got += c.poll(64, timeout=0.5)  # nothing more behind them
    return got


def fill(addrs, n: int, queues: int = 2) -> None:
    with Producer(addrs) as p:
        for i in range(n):
            p.send("orders", b"o%03d" % i, order_key=f"k{i % queues}")


def run_until(t: Transform, consumed: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while t.counters.consumed < consumed and time.monotonic() < deadline:
        t.step(0.1)
    assert t.counters.consumed == consumed, t.counters


def test_each_input_is_output_once_in_its_queues_order(cluster_factory):
    cluster = cluster_factory(1)
    addrs = cluster.file.addrs
    fill(addrs, 60)
    with Transform("enrich", "orders", "enriched", upper, addrs, max_batch=16) as t:
        run_until(t, 60)
        assert t.counters.produced == 60 and t.counters.fenced == 0
        figures = decode_json(t.tx.producer.request(cluster.file.brokers[0].name,
                                                    Op.LIST_TRANSACTIONS, b"{}")[1])["figures"]
    # the broker knows the group commits with its output: the console marks it
    assert figures["transform_groups"] == {"enrich": t.counters.committed}
    assert figures["offsets_committed_total"] == t.counters.committed
    got = read_all(addrs, "enriched", 60)
    assert sorted(m.body for m in got) == [b"O%03d" % i for i in range(60)]
    for key in (0, 1):  # one key's order holds from input to output
        mine = [int(m.body[1:]) for m in got if int(m.body[1:]) % 2 == key]
        assert mine == sorted(mine)
    assert all(m.properties.get(PROP_CONSUMED_FROM, "").startswith("orders:") for m in got)
    # the group's offsets moved with the transactions: a new transform has nothing to do
    with Transform("enrich", "orders", "enriched", upper, addrs) as again:
        again.step(1.0)
        assert again.counters.consumed == 0


def test_a_zombie_whose_queue_moved_is_fenced_and_its_output_never_seen(cluster_factory):
    cluster = cluster_factory(1, extra_args=["--queues", "1"])
    addrs = cluster.file.addrs
    name = cluster.file.brokers[0].name
    fill(addrs, 10, queues=1)
    zombie = Transform("enrich", "orders", "enriched", upper, addrs, client_id="zombie")
    batch = []
    deadline = time.monotonic() + 20
    while len(batch) < 10 and time.monotonic() < deadline:
        batch += zombie.consumer.poll(16, 0.1)
    assert len(batch) == 10
    queue = (name, 0)
    # the zombie stalls; meanwhile its lock goes (as a rebalance or a lease run out would
    # take it) and another member transforms the queue
    zombie.tx.producer.request(name, Op.UNLOCK_BATCH, encode_json({
        "group": "enrich", "client_id": zombie.consumer.client_id, "topic": "orders",
        "queues": [0]}))
    with Transform("enrich", "orders", "enriched", upper, addrs, client_id="live") as live:
        run_until(live, 10)
    assert zombie.commit_batch(queue, batch) == 0  # it wakes and commits what it made
    assert zombie.counters.fenced == 1
    listing = decode_json(zombie.tx.producer.request(name, Op.LIST_TRANSACTIONS,
                                                     encode_json({}))[1])
    assert listing["pending"] == []  # its halves rolled back, not waiting for a check
    assert listing["figures"]["rolled_back"] == {"fenced": 10}
    assert listing["figures"]["fenced_total"] == 1
    zombie.close()
    got = read_all(addrs, "enriched", 10)
    assert sorted(m.body for m in got) == [b"O%03d" % i for i in range(10)]
