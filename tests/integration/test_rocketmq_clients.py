"""RocketMQ's own client on a floodgate broker (`broker serve --grpc-port`): the official
Python client from PyPI (rocketmq-python-client), unchanged, sends normal, tagged, FIFO
and delayed messages and a SimpleConsumer receives every one, acknowledges it, sees an
unacknowledged one again once its invisibility runs out, and the broker's offsets move
as a native consumer's do. An RPC not served answers UNIMPLEMENTED by name; bytes that
are not the RPC's message, INVALID_ARGUMENT, and nothing is stored."""

from __future__ import annotations

import os
import time

import pytest

from broker_core.cluster.ports import free_port_range
from tests.integration.rocketmq_client_calls import (
    _consumer,
    _get,
    _receive_all,
    _send,
    grpc_broker,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    yield from grpc_broker(tmp_path_factory)


def test_the_official_producer_and_simple_consumer_move_every_message(broker):
    ids = _send(broker, "orders", [{"body": f"order {i}".encode(), "tag": "paid",
                                    "keys": f"k{i}", "properties": {"shop": "s1"}}
                                   for i in range(40)])
    consumer = _consumer(broker, "billing", "orders")
    try:
        got = _receive_all(consumer, 40)
    finally:
        consumer.shutdown()
    assert sorted(m.message_id for m in got) == sorted(ids)  # each once, with its id
    first = next(m for m in got if m.body == b"order 0")
    assert (first.tag, first.keys, first.properties.get("shop")) == ("paid", {"k0"}, "s1")
    assert not any(m.corrupted for m in got)  # the body's CRC as the client checks it
    offsets = _get(f"http://{broker['http']}/admin/offsets?group=billing&topic=orders")
    assert sum(q["lag"] for q in offsets["queues"]) == 0  # acknowledged: committed


def test_a_fifo_group_keeps_one_queue_and_its_order(broker):
    specs = [{"body": f"{g}-{i}".encode(), "message_group": g}
             for i in range(10) for g in ("a", "b", "c")]
    _send(broker, "ledger", specs)
    consumer = _consumer(broker, "auditors", "ledger")
    try:
        got = _receive_all(consumer, 30)
    finally:
        consumer.shutdown()
    assert len(got) == 30
    for g in ("a", "b", "c"):  # received in the order sent: one queue, in order
        mine = [int(m.body.split(b"-")[1]) for m in got if m.message_group == g]
        assert mine == list(range(10)), f"group {g}: {mine}"


def test_a_delayed_message_arrives_when_due_and_an_unserved_delay_is_refused(broker):
    from rocketmq.v5.exception import BadRequestException

    between = int(time.time()) + 7  # between the broker's 5 s and 10 s delay levels
    with pytest.raises(BadRequestException, match="delay levels"):
        _send(broker, "later", [{"body": b"x", "delivery_timestamp": between}])
    due = int(time.time()) + 1  # (whole seconds: what the client sends)
    _send(broker, "later", [{"body": b"soon", "delivery_timestamp": due}])
    consumer = _consumer(broker, "late-readers", "later")
    try:
        got = _receive_all(consumer, 1)
    finally:
        consumer.shutdown()
    assert [m.body for m in got] == [b"soon"]
    assert time.time() >= due  # held until due, not handed out at once


def test_an_unacknowledged_message_comes_back_after_its_invisibility(broker):
    """Handed out for 30 s, it stays invisible; its invisibility cut to 1 s
    (ChangeInvisibleDuration), it comes back, one attempt more, and the first
    delivery's handle no longer acknowledges it."""
    from rocketmq.v5.exception import BadRequestException

    _send(broker, "retries", [{"body": b"flaky"}])
    consumer = _consumer(broker, "workers", "retries")
    try:
        (first,) = _receive_all(consumer, 1, invisible_s=30, ack=False)
        # invisible meanwhile (16 receives: each asks one queue of 4, at random)
        assert [m for _ in range(16) for m in consumer.receive(16, 30)] == []
        consumer.change_invisible_duration(first, 1)
        (again,) = _receive_all(consumer, 1, invisible_s=30, ack=False)
        assert again.message_id == first.message_id and again.delivery_attempt == 2
        with pytest.raises(BadRequestException):
            consumer.ack(first)  # its handle went stale when it was handed out again
        consumer.ack(again)
        assert [m for _ in range(16) for m in consumer.receive(16, 30)] == []
    finally:
        consumer.shutdown()


def test_an_unserved_rpc_is_named_and_a_malformed_request_stores_nothing(broker):
    import grpc

    before = _get(f"http://{broker['http']}/stats")["commitlog"]["max_offset"]
    with grpc.insecure_channel(broker["grpc"]) as channel:
        call = channel.unary_unary("/apache.rocketmq.v2.MessagingService/RecallMessage")
        with pytest.raises(grpc.RpcError) as unserved:
            call(b"", timeout=5)
        assert unserved.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert "RecallMessage" in unserved.value.details()
        send = channel.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage")
        with pytest.raises(grpc.RpcError) as bad:
            send(b"\x0a\xff\xff\xff", timeout=5)
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert _get(f"http://{broker['http']}/stats")["commitlog"]["max_offset"] == before


def test_cluster_up_grpc_routes_every_master_and_a_master_killed_loses_nothing(tmp_path):
    """`cluster up --groups 2 --replicas 2 --grpc`: a client pointed at one broker is
    routed to both groups' masters; a send to a slave's port is refused HA_NOT_AVAILABLE
    (RocketMQ's word for it); group-1's master SIGKILLed, a new client's route names the
    promoted slave, and a SimpleConsumer reads every message acknowledged before and
    after."""
    import signal

    import grpc

    from broker_core.cluster.launcher import Cluster
    from broker_core.cluster.roles import broker_role
    from broker_core.grpc_front import rocketmq_v2_pb2 as pb

    cluster = Cluster(0, free_port_range(40), tmp_path / "c", segment_size="64M",
                      name="grpcup", groups=2, replicas=2, replication="sync", grpc=True)
    cluster.up(timeout=60)

    def masters() -> dict[str, object]:
        return {b.group: b for b in cluster.file.brokers
                if broker_role(b.addr).get("role") == "MASTER"}

    try:
        first = masters()
        assert set(first) == {"group-1", "group-2"} and all(b.grpc for b in first.values())
        ids = set(_send({"grpc": first["group-1"].grpc}, "orders",
                        [{"body": f"before {i}".encode()} for i in range(40)]))
        held = {g: _get(f"http://{b.http}/admin/topic?topic=orders")["topics"][0]["messages"]
                for g, b in first.items()}
        assert all(held.values()) and sum(held.values()) == 40, \
            f"the route names both masters: {held}"
        slave = next(b for b in cluster.file.brokers if b.group == "group-1"
                     and b is not first["group-1"])
        request = pb.SendMessageRequest(messages=[pb.Message(
            topic=pb.Resource(name="orders"), body=b"to the slave",
            system_properties=pb.SystemProperties(message_id="01AB"))])
        with grpc.insecure_channel(slave.grpc) as channel:
            raw = channel.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage")
            answer = pb.SendMessageResponse.FromString(raw(request.SerializeToString(),
                                                           timeout=10))
        assert answer.entries[0].status.code == pb.HA_NOT_AVAILABLE
        os.kill(cluster.procs[first["group-1"].name].pid, signal.SIGKILL)
        after = wait_for(lambda: (m := masters()).get("group-1") not in (None, first["group-1"])
                         and m, 30, "group-1's slave promoted")
        ids |= set(_send({"grpc": after["group-2"].grpc}, "orders",
                         [{"body": f"after {i}".encode()} for i in range(40)]))
        assert len(ids) == 80
        consumer = _consumer({"grpc": after["group-1"].grpc}, "readers", "orders")
        try:
            read = _receive_all(consumer, 80)
        finally:
            consumer.shutdown()
        got = {m.message_id for m in read}
        debug = {b.name: (_get(f"http://{b.http}/admin/offsets?group=readers&topic=orders"),
                          _get(f"http://{b.http}/admin/topic?topic=orders")["topics"])
                 for b in after.values()}
        assert got == ids, (f"{len(ids - got)} acknowledged and not read; read "
                            f"{sorted(m.body for m in read)}; {debug}")
    finally:
        cluster.down(grace=5.0)


def test_a_message_group_is_handed_out_in_order_one_batch_at_a_time(broker):
    """FIFO through pop: while a message group's messages are out and not acknowledged,
    none after them is handed out, not even when they come back after their
    invisibility; once acknowledged, the rest follow in order."""
    _send(broker, "fifo-pop", [{"body": f"g-{i}".encode(), "message_group": "g"}
                               for i in range(6)])
    consumer = _consumer(broker, "in-order", "fifo-pop")

    def receive(batch: int, want: int) -> list[int]:
        got, deadline = [], time.monotonic() + 20
        while len(got) < want and time.monotonic() < deadline:
            got += consumer.receive(batch, 30)
        return got

    def bodies(messages) -> list[int]:
        return [int(m.body.split(b"-")[1]) for m in messages]

    try:
        first = receive(2, 2)
        assert bodies(first) == [0, 1]
        # (a receive asks one queue of the route's 4, at random: ask many times)
        assert [m for _ in range(16) for m in consumer.receive(16, 30)] == []
        for m in first:
            consumer.change_invisible_duration(m, 1)
        again = receive(16, 2)
        assert bodies(again) == [0, 1] and all(m.delivery_attempt == 2 for m in again)
        for m in again:
            consumer.ack(m)
        rest = receive(16, 4)
        assert bodies(rest) == [2, 3, 4, 5]
        for m in rest:
            consumer.ack(m)
    finally:
        consumer.shutdown()


def test_what_a_client_holds_survives_its_masters_death(tmp_path):
    """Pop state goes to the slave with the group's tables: after a failover, messages a
    RocketMQ consumer acknowledged are not handed out again, and those it holds stay
    invisible until their time, then come back one attempt later."""
    import signal

    from broker_core.cluster.launcher import Cluster
    from broker_core.cluster.roles import broker_role

    cluster = Cluster(0, free_port_range(20), tmp_path / "c", segment_size="64M",
                      name="popfail", groups=1, replicas=2, replication="sync", grpc=True)
    cluster.up(timeout=60)
    try:
        roles = {b.name: broker_role(b.addr).get("role") for b in cluster.file.brokers}
        master = next(b for b in cluster.file.brokers if roles[b.name] == "MASTER")
        slave = next(b for b in cluster.file.brokers if b is not master)
        ids = _send({"grpc": master.grpc}, "jobs", [{"body": f"job {i}".encode()}
                                                    for i in range(4)])
        consumer = _consumer({"grpc": master.grpc}, "workers", "jobs")
        try:
            held = _receive_all(consumer, 4, invisible_s=8, ack=False)
            taken_at = time.time()
            for m in held[:2]:
                consumer.ack(m)
        finally:
            consumer.shutdown()
        done = {m.message_id for m in held[:2]}

        def slave_holds() -> bool:  # the replica's copy of the state: 2 out, 2 acknowledged
            doc = _get(f"http://{slave.http}/admin/offsets?group=workers&topic=jobs")
            return (sum(q.get("in_flight", 0) for q in doc["queues"]) == 2
                    and sum(q["committed"] for q in doc["queues"]) == 2)

        wait_for(slave_holds, 10, "the slave holding the pop state")
        os.kill(cluster.procs[master.name].pid, signal.SIGKILL)
        wait_for(lambda: broker_role(slave.addr).get("role") == "MASTER", 30,
                 "the slave promoted")
        consumer = _consumer({"grpc": slave.grpc}, "workers", "jobs")
        try:
            again = _receive_all(consumer, 2, invisible_s=30)
        finally:
            consumer.shutdown()
        assert {m.message_id for m in again} == set(ids) - done  # the acknowledged stay so
        assert all(m.delivery_attempt == 2 for m in again)
        assert time.time() - taken_at >= 8 - 0.5  # not before their invisibility ran out
    finally:
        cluster.down(grace=5.0)


def test_a_long_poll_returns_when_a_message_arrives_not_at_its_deadline(broker):
    """A receive waiting on an empty queue (10 s long poll) is answered by the send that
    fills it: the arrival wakes it."""
    import threading

    import grpc

    from broker_core.grpc_front import rocketmq_v2_pb2 as pb

    topic = "wakeups"
    _send(broker, topic, [{"body": b"warm"}])  # queue 0 (a new topic's first turn) ...
    request = pb.ReceiveMessageRequest(
        group=pb.Resource(name="sleepers"), batch_size=16,
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=1))
    request.long_polling_timeout.seconds = 10
    request.invisible_duration.seconds = 30
    answers: list = []

    def receive() -> None:
        with grpc.insecure_channel(broker["grpc"]) as channel:
            call = channel.unary_stream("/apache.rocketmq.v2.MessagingService/ReceiveMessage")
            started = time.monotonic()
            got = [pb.ReceiveMessageResponse.FromString(r)
                   for r in call(request.SerializeToString(), timeout=20)]
            answers.append((time.monotonic() - started, got))

    waiting = threading.Thread(target=receive)
    waiting.start()
    wait_for(lambda: _get(f"http://{broker['http']}/admin/offsets?group=sleepers")
             ["receives_waiting"] == 1, 10, "the receive waiting")  # (else no test)
    _send(broker, topic, [{"body": b"wake up"}])  # ... and queue 1, the next turn
    waiting.join(30)
    took, got = answers[0]
    assert [a.message.body for a in got if a.HasField("message")] == [b"wake up"]
    assert took < 8, f"answered after {took:.1f} s: at its deadline, not on the arrival"


def test_a_body_at_the_brokers_limit_goes_through_and_one_over_is_refused_by_name(broker):
    """gRPC's own 4 MiB request limit answered such a send RESOURCE_EXHAUSTED, below the
    limit the broker's Settings give the client."""
    limit = 4 * 1024 * 1024  # the broker's default max_message_bytes
    body = bytes(range(256)) * (limit // 256)
    ids = _send(broker, "big", [{"body": body, "keys": "at-limit"}])
    consumer = _consumer(broker, "big-readers", "big")
    try:
        got = _receive_all(consumer, 1)
    finally:
        consumer.shutdown()
    assert [m.message_id for m in got] == ids
    assert got[0].body == body and not got[0].corrupted
    with pytest.raises(Exception, match=f"max size={limit} bytes"):  # (the client's check,
        _send(broker, "big", [{"body": body + b"x"}])  # of the limit the broker told it)
