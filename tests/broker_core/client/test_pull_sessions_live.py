"""Consumers of many queues through pull sessions, against real brokers over TCP: every
message once though the broker forgets the sessions mid-way, and through a rebalance
that takes queues out of a session and gives them to another member."""

from __future__ import annotations

import pytest

from broker_core.client.consumer import Consumer
from broker_core.client.producer import Producer

pytestmark = pytest.mark.timeout(60)

QUEUES = 64  # four times what a pull names before it opens a session


def produce(brokers, topic: str, n: int, start: int = 0) -> set[bytes]:
    bodies = {f"{topic}-{i}".encode() for i in range(start, start + n)}
    with Producer({"b1": brokers.addr("b1")}, retries=0) as producer:
        for body in sorted(bodies):
            producer.send(topic, body)
    return bodies


def drain(consumers, want: int) -> list[bytes]:
    got: list[bytes] = []
    for _ in range(300):
        for c in consumers:
            got += [m.body for m in c.poll(max_msgs=64, timeout=0.05)]
        if len(got) >= want:
            break
    return got


def make_topic(brokers, topic: str) -> None:
    brokers.call(brokers["b1"].topics.put, topic, QUEUES)


def test_every_message_once_though_the_broker_forgets_the_sessions(brokers):
    make_topic(brokers, "wide-forgets")
    c = Consumer("g", "wide-forgets", {"b1": brokers.addr("b1")})
    try:
        sent = produce(brokers, "wide-forgets", 200)
        first = drain([c], 200)
        pulls = brokers["b1"].pulls
        assert brokers.call(len, pulls.sessions) == 1  # one session for its 64 queues
        brokers.call(pulls.answer_all)  # held pulls answered, sessions dropped: a restart's
        sent |= produce(brokers, "wide-forgets", 200, start=200)
        second = drain([c], 200)
        assert sorted(first + second) == sorted(sent)  # each once, none lost
        assert brokers.call(len, pulls.sessions) == 1  # named anew
    finally:
        c.close()


def test_a_rebalance_moves_queues_out_of_one_session_into_another(brokers):
    make_topic(brokers, "wide-rebalance")
    a = Consumer("g", "wide-rebalance", {"b1": brokers.addr("b1")})
    b = None
    try:
        sent = produce(brokers, "wide-rebalance", 100)
        got = drain([a], 100)
        a.commit()
        b = Consumer("g", "wide-rebalance", {"b1": brokers.addr("b1")})
        for _ in range(100):  # until the two share the queues
            a.poll(timeout=0.05)
            b.poll(timeout=0.05)
            if a.assignment and b.assignment and \
                    len(a.assignment) + len(b.assignment) == QUEUES:
                break
        assert a.assignment and b.assignment
        sent |= produce(brokers, "wide-rebalance", 300, start=100)
        got += drain([a, b], 300)
        assert sorted(got) == sorted(sent)  # each once: the rebalance came before them
    finally:
        a.close()
        if b is not None:
            b.close()
