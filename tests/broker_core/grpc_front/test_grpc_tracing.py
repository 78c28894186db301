"""What a RocketMQ client's messages add to the trace, through the gRPC front end's own
RPC methods on a broker in-process: a sampled send is stored traced with a `send`
record naming the client; what a pop hands out gets a `deliver` record, stamped with
its acknowledgement when that comes within the hold, sent out unacknowledged after it;
an untraced message adds nothing."""

from __future__ import annotations

import asyncio

from broker_core.grpc_front import rocketmq_v2_pb2 as pb
from broker_core.grpc_front.service import GrpcFront
from broker_core.grpc_front.tracing import HOLD_S
from broker_core.trace.records import PROP_TRACE, TRACE_TOPIC, decode_batch


class Call:
    """What grpc.aio gives a method: the caller's metadata and address."""

    def __init__(self, client_id: str | None) -> None:
        self.client_id = client_id

    def invocation_metadata(self):
        return [("x-mq-client-id", self.client_id)] if self.client_id else []

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"


class Clock:
    def __init__(self) -> None:
        self.t = 1_794_355_200.0

    def __call__(self) -> float:
        return self.t


def front_on(broker, rate: float) -> tuple[GrpcFront, Clock]:
    broker.config.grpc_trace_rate = rate
    front, clock = GrpcFront(broker, "127.0.0.1", 0), Clock()
    front.trace.clock = clock
    return front, clock


def send(front, keys: str, trace_context: str = "", client: str | None = "app-1") -> None:
    m = pb.Message(topic=pb.Resource(name="orders"), body=keys.encode())
    m.system_properties.keys.append(keys)
    m.system_properties.message_id = f"RMQ-{keys}"
    m.system_properties.born_timestamp.FromMilliseconds(1_794_355_199_250)
    if trace_context:
        m.system_properties.trace_context = trace_context
    answer = asyncio.run(front.send_message(pb.SendMessageRequest(messages=[m]), Call(client)))
    assert answer.status.code == pb.OK


def receive(front, group: str = "billing") -> list[pb.Message]:
    async def run() -> list[pb.Message]:
        got = []
        for qid in range(front.broker.topics.get("orders", create=False)):
            req = pb.ReceiveMessageRequest(
                group=pb.Resource(name=group), batch_size=32,
                message_queue=pb.MessageQueue(topic=pb.Resource(name="orders"), id=qid))
            req.invisible_duration.seconds = 30
            got += [a.message async for a in front.receive_message(req, Call("app-2"))
                    if a.WhichOneof("content") == "message"]
        return got
    return asyncio.run(run())


def ack(front, m: pb.Message, group: str = "billing") -> None:
    req = pb.AckMessageRequest(group=pb.Resource(name=group), topic=m.topic, entries=[
        pb.AckMessageEntry(message_id=m.system_properties.message_id,
                           receipt_handle=m.system_properties.receipt_handle)])
    assert asyncio.run(front.ack_message(req, Call("app-2"))).status.code == pb.OK


def records(broker) -> list[dict]:
    """The records written for clients (the broker's own `stored` summaries left out)."""
    got = broker.store.get(TRACE_TOPIC, 0, 0, 1000).messages
    return [r for m in got for r in decode_batch(m.body) if r["type"] != "stored"]


def test_a_sampled_send_and_its_pop_are_traced_with_the_acknowledgement(broker):
    front, clock = front_on(broker, 1.0)
    send(front, "k1")
    (m,) = receive(front)
    clock.t += 0.5
    ack(front, m)
    broker.trace_store.flush()
    sent = [r for r in records(broker) if r["type"] == "send"]
    delivered = [r for r in records(broker) if r["type"] == "deliver"]
    assert [(r["keys"], r["client"], r["born_ms"], r["via"]) for r in sent] == [
        ("k1", "app-1", 1_794_355_199_250, "gRPC")]
    stored = broker.store.query_by_key("k1", "orders").messages[0]
    assert PROP_TRACE in stored.properties and sent[0]["id"] == stored.msg_id
    assert [(r["id"], r["group"], r["client"], r["pulled_ms"], r["committed_ms"])
            for r in delivered] == [(stored.msg_id, "billing", "app-2", 1_794_355_200_000,
                                     1_794_355_200_500)]
    assert PROP_TRACE not in m.user_properties  # floodgate's mark is not the client's


def test_a_delivery_not_acknowledged_goes_out_after_the_hold(broker):
    front, clock = front_on(broker, 1.0)
    send(front, "k2")
    (m,) = receive(front)
    broker.trace_store.flush()  # within the hold: not yet
    assert [r["type"] for r in records(broker)] == ["send"]
    clock.t += HOLD_S
    broker.trace_store.flush()
    (late,) = [r for r in records(broker) if r["type"] == "deliver"]
    assert late["committed_ms"] is None
    ack(front, m)  # acknowledged after its record went out: nothing more written
    broker.trace_store.flush()
    assert len(records(broker)) == 2


def test_a_broker_stopping_writes_what_it_holds(broker):
    front, _clock = front_on(broker, 1.0)
    send(front, "k3")
    receive(front)
    broker.trace_store.flush(final=True)
    assert sorted(r["type"] for r in records(broker)) == ["deliver", "send"]


def test_only_sampled_or_client_traced_sends_are_traced(broker):
    front, _clock = front_on(broker, 0.0)
    send(front, "plain")
    send(front, "theirs", trace_context="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
         client=None)
    receive(front)
    broker.trace_store.flush(final=True)
    got = records(broker)
    assert {r["keys"] for r in got if r["type"] == "send"} == {"theirs"}
    assert [r["client"] for r in got if r["type"] == "send"] == ["ipv4:127.0.0.1:50000"]
    assert len([r for r in got if r["type"] == "deliver"]) == 1  # the traced one only


def test_a_held_delivery_asks_for_a_flush_when_its_hold_ends(broker):
    """What is held back asks the broker's housekeeping for a flush at the end of its
    hold (an idle broker's tick flushes nothing): at the receive, then again with what
    is left of it at each flush that finds it still held."""
    front, clock = front_on(broker, 1.0)
    asked: list[float] = []
    broker.trace_store.flush_after = asked.append
    send(front, "k4")
    receive(front)
    assert asked == [HOLD_S]
    clock.t += 0.5
    broker.trace_store.flush()
    assert asked[-1] == HOLD_S - 0.5 and [r["type"] for r in records(broker)] == ["send"]
    clock.t += HOLD_S - 0.5
    broker.trace_store.flush()
    assert len(asked) == 2 and [r["type"] for r in records(broker)] == ["send", "deliver"]
