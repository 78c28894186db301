"""RocketMQ's own transactional producer on a floodgate broker (`broker serve
--grpc-port`, grpc_front.transactions): the official Python client's half messages are
committed or rolled back with EndTransaction, and one its application never settles is
checked back through the producer's Telemetry stream, its checker's answer applied."""

from __future__ import annotations

import threading

import pytest

from tests.integration.rocketmq_client_calls import (
    _config,
    _consumer,
    _get,
    _receive_all,
    grpc_broker,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # a half unsettled 1 s is checked back (RocketMQ: 6 s), again every second
    yield from grpc_broker(tmp_path_factory, "--tx-check-s", "1")


def _transactions(broker) -> dict:
    return _get(f"http://{broker['http']}/stats")["transactions"]


def _stored(broker, topic: str) -> int:
    """Messages in the topic's queues (what consumers can read)."""
    from broker_core.client import admin

    doc = admin.topic(broker["http"], query={"topic": topic})
    return sum(t["messages"] for t in doc["topics"] if t["topic"] == topic)


class Checker:
    """An application's TransactionChecker: what it was asked, and its answer."""

    def __init__(self, answer) -> None:
        from rocketmq import TransactionChecker

        self.answer, self.asked, self.event = answer, [], threading.Event()
        checker = self

        class _Checker(TransactionChecker):
            def check(self, message):
                checker.asked.append(message)
                checker.event.set()
                return checker.answer

        self.client_side = _Checker()


def _producer(broker, topic: str, checker: Checker):
    from rocketmq import Producer

    producer = Producer(_config(broker), (topic,), checker.client_side)
    producer.startup()
    return producer


def _half(producer, topic: str, body: bytes):
    from rocketmq import Message

    m = Message()
    m.topic, m.body, m.keys = topic, body, body.decode()
    tx = producer.begin_transaction()
    return tx, producer.send(m, tx)


def _read_one(broker, group: str, topic: str):
    """The one message a SimpleConsumer of `group` receives (and acknowledges)."""
    consumer = _consumer(broker, group, topic)
    try:
        (got,) = _receive_all(consumer, 1)
    finally:
        consumer.shutdown()
    return got


def test_a_committed_half_is_delivered_and_a_rolled_back_one_never_stored(broker):
    from rocketmq import TransactionResolution

    checker = Checker(TransactionResolution.ROLLBACK)
    producer = _producer(broker, "payments", checker)
    before = _transactions(broker)
    try:
        tx, receipt = _half(producer, "payments", b"pay 1")
        assert receipt.transaction_id.startswith("rmq:")  # the broker's name for the half
        assert _stored(broker, "payments") == 0  # a half is kept aside until committed
        tx.commit()
        tx2, _receipt2 = _half(producer, "payments", b"pay 2")
        tx2.rollback()
    finally:
        producer.shutdown()
    # (/stats is the broker's last per-second snapshot)
    wait_for(lambda: _transactions(broker)["committed_total"] - before["committed_total"] == 1
             and _transactions(broker)["pending"] == 0, 10, "one committed, none pending")
    assert _stored(broker, "payments") == 1  # the rolled-back one never reached the topic
    got = _read_one(broker, "pay-readers", "payments")
    assert got.body == b"pay 1"
    assert got.message_id == receipt.message_id
    assert "TRAN_MSG" not in got.properties and "PGROUP" not in got.properties


def test_a_half_never_settled_is_checked_back_and_its_checkers_commit_applied(broker):
    from rocketmq import TransactionResolution

    checker = Checker(TransactionResolution.COMMIT)
    producer = _producer(broker, "refunds", checker)
    try:
        _tx, receipt = _half(producer, "refunds", b"refund 7")  # the application died here
        assert checker.event.wait(30), "no check came through the Telemetry stream"
        asked = checker.asked[0]
        assert (asked.topic, asked.body, asked.message_id) == \
            ("refunds", b"refund 7", receipt.message_id)
        wait_for(lambda: _stored(broker, "refunds") == 1, 20, "the checked half committed")
    finally:
        producer.shutdown()
    assert _read_one(broker, "refund-readers", "refunds").body == b"refund 7"
    wait_for(lambda: _transactions(broker)["pending"] == 0, 10, "nothing pending")


def test_end_transaction_names_what_it_cannot_settle(broker):
    import grpc

    from broker_core.grpc_front import rocketmq_v2_pb2 as pb

    with grpc.insecure_channel(broker["grpc"]) as channel:
        end = channel.unary_unary("/apache.rocketmq.v2.MessagingService/EndTransaction",
                                  request_serializer=pb.EndTransactionRequest.SerializeToString,
                                  response_deserializer=pb.EndTransactionResponse.FromString)
        for tid, resolution, code in (("rmq:999999999", pb.COMMIT, pb.INVALID_TRANSACTION_ID),
                                      ("other-broker:1", pb.COMMIT, pb.INVALID_TRANSACTION_ID),
                                      ("not an id", pb.ROLLBACK, pb.INVALID_TRANSACTION_ID),
                                      ("rmq:0", pb.TRANSACTION_RESOLUTION_UNSPECIFIED,
                                       pb.BAD_REQUEST)):
            answer = end(pb.EndTransactionRequest(transaction_id=tid, resolution=resolution),
                         timeout=5)
            assert answer.status.code == code, (tid, answer.status)
            assert answer.status.message
