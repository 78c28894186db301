"""Orderly consumption against a real broker: consumers of a group joining and
leaving never process one queue at the same time, every key's messages are
handled in the order they were sent, and a failed message is retried in place
(its queue waits; nothing behind it overtakes it) until it goes to the DLQ."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest

from broker_core.client.connection import Connection
from broker_core.client.consumer import Consumer
from broker_core.client.producer import Producer
from broker_core.client.retry import dlq_topic
from broker_core.cluster.readback import read_queue_bodies
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

KEYS, PER_KEY = 16, 40


class Journal:
    """What every handler did, when: the test's checker."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: dict[tuple, list[tuple[float, float, str]]] = defaultdict(list)
        self.seqs: dict[str, list[int]] = defaultdict(list)

    def handler(self, name: str, slow: float = 0.0):
        def handle(m) -> None:
            start = time.monotonic()
            time.sleep(slow)
            key, seq = m.body.decode().split(":")
            with self.lock:
                self.spans[(m.store_host_raw, m.queue_id)].append(
                    (start, time.monotonic(), name))
                self.seqs[key].append(int(seq))
        return handle

    def handled_by(self, name: str) -> bool:
        with self.lock:
            return any(n == name for spans in self.spans.values() for _s, _e, n in spans)

    def overlaps(self) -> list:
        bad = []
        for queue, spans in self.spans.items():
            end, owner = 0.0, None  # the latest end so far and whose it was
            for start, stop, name in sorted(spans):
                if start < end and name != owner:
                    bad.append((queue, owner, name))
                if stop > end:
                    end, owner = stop, name
        return bad

    def order_violations(self) -> dict:
        """A key's message handled before one sent earlier that had not been handled
        yet (a redelivery of what came before is at-least-once, not a violation)."""
        out = {}
        for key, seqs in self.seqs.items():
            top = -1
            for s in seqs:
                if s > top + 1:
                    out[key] = seqs
                    break
                top = max(top, s)
        return out


def run(consumer: Consumer, handler, stop: threading.Event) -> threading.Thread:
    t = threading.Thread(target=consumer.consume, args=(handler,),
                         kwargs={"timeout": 0.1, "stop": stop}, daemon=True)
    t.start()
    return t


def test_consumers_joining_and_leaving_never_share_a_queue_and_keep_each_keys_order(
        cluster_factory):
    cluster = cluster_factory(1)
    addrs = cluster.file.addrs
    journal = Journal()
    with Producer(addrs) as p:
        for i in range(PER_KEY):
            for k in range(KEYS):
                p.send("orders", f"k{k}:{i}".encode(), order_key=f"k{k}")
    stops = [threading.Event() for _ in range(3)]
    consumers = [Consumer("billing", "orders", addrs, client_id=f"c{i}", orderly=True)
                 for i in range(3)]
    threads = [run(consumers[0], journal.handler("c0", 0.02), stops[0])]
    wait_for(lambda: journal.handled_by("c0"), 15, "c0 handling")
    threads.append(run(consumers[1], journal.handler("c1", 0.02), stops[1]))  # rebalance
    wait_for(lambda: consumers[1].assignment, 15, "c1 in the group, owning queues")
    threads.append(run(consumers[2], journal.handler("c2", 0.02), stops[2]))
    wait_for(lambda: journal.handled_by("c2"), 15, "c2 handling")
    stops[0].set()  # c0 leaves: its queues go to the others once released
    threads[0].join(10)
    consumers[0].close()
    deadline = time.monotonic() + 40
    while (sum(len(set(s)) for s in journal.seqs.values()) < KEYS * PER_KEY
           and time.monotonic() < deadline):
        time.sleep(0.1)
    for stop, t, c in zip(stops[1:], threads[1:], consumers[1:], strict=True):
        stop.set()
        t.join(10)
        c.close()
    assert journal.overlaps() == []
    assert journal.order_violations() == {}
    assert all(set(s) == set(range(PER_KEY)) for s in journal.seqs.values()), {
        k: PER_KEY - len(set(s)) for k, s in journal.seqs.items()}
    handlers = {n for spans in journal.spans.values() for _s, _e, n in spans}
    assert handlers == {"c0", "c1", "c2"}  # all three took part


def test_a_failed_message_is_retried_in_place_then_goes_to_the_dlq(cluster_factory):
    cluster = cluster_factory(1)
    addrs = cluster.file.addrs
    with Producer(addrs) as p:
        for i in range(6):
            p.send("orders", f"k:{i}".encode(), order_key="k")
    handled: list[tuple[int, float]] = []
    fails = defaultdict(int)

    def handler(m) -> None:
        seq = int(m.body.split(b":")[1])
        handled.append((seq, time.monotonic()))
        if seq == 1 and fails[1] < 2:  # fails twice, then succeeds
            fails[1] += 1
            raise RuntimeError("payment service down")
        if seq == 3:  # fails always: past max_reconsume it is a dead letter
            raise RuntimeError("poison")

    stop = threading.Event()
    consumer = Consumer("billing", "orders", addrs, orderly=True, max_reconsume=2)
    t = run(consumer, handler, stop)
    deadline = time.monotonic() + 30
    while 5 not in [s for s, _t in handled] and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    t.join(10)
    consumer.close()
    seqs = [s for s, _t in handled]
    assert seqs == [0, 1, 1, 1, 2, 3, 3, 3, 4, 5], seqs
    waits = [b - a for (s, a), (_s2, b) in zip(handled, handled[1:], strict=False) if s in (1, 3)][:2]
    assert all(w >= 0.9 for w in waits), waits  # its queue waited before the retry
    conn = Connection(addrs[next(iter(addrs))])
    try:
        assert list(read_queue_bodies(conn, dlq_topic("billing"), 0)) == [b"k:3"]
    finally:
        conn.close()
