"""The broker's periodic work on a real socket and store: an idle broker arms no
timer at all, work wakes the tick and the loop-lag probe, a delayed message is
delivered when due by one deadline (not a pass 20 times a second), trace records
held back are written when due, a RocketMQ client's request is work as a native
read is, and /stats of a broker that went idle is brought up to date."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from broker_core import protocol as p
from broker_core.cluster.ports import free_port_range
from broker_core.protocol.delay import with_delay
from broker_core.server.broker import Broker, BrokerConfig
from broker_core.server.housekeeping import Housekeeping
from broker_core.server.tcp import start_tcp
from broker_core.trace.records import TRACE_TOPIC, decode_batch
from tests.clock import ManualClock
from tests.waiting import until

pytestmark = pytest.mark.timeout(60)


class WatchedLoop(asyncio.SelectorEventLoop):
    """The stdlib loop, saying which timers are armed (what would wake it)."""

    def armed(self, within_s: float) -> list[asyncio.TimerHandle]:
        horizon = self.time() + within_s
        return [h for h in self._scheduled if not h.cancelled() and h.when() <= horizon]


def run(main) -> None:
    with asyncio.Runner(loop_factory=WatchedLoop) as runner:
        runner.run(main())



class Client:
    """Raw frames over one connection, one request at a time."""

    def __init__(self, reader, writer) -> None:
        self.reader, self.writer, self.rid = reader, writer, 0

    async def call(self, op: int, body: bytes) -> tuple[p.Header, bytes]:
        self.rid += 1
        self.writer.write(p.encode_frame(op, self.rid, body))
        head = await self.reader.readexactly(p.HEADER_SIZE)
        header = p.decode_header(head)
        rest = await self.reader.readexactly(p.LENGTH_SIZE + header.length - p.HEADER_SIZE)
        return header, rest

    async def send(self, body: bytes, topic: str = "orders", props=None) -> int:
        header, _ = await self.call(p.Op.SEND, p.encode_send(
            topic, 0, p.OutMessage(body, properties=props or {})))
        return header.code


async def serving(tmp_path, clock=time.time):
    port = free_port_range(2)
    broker = Broker(BrokerConfig("b1", tmp_path / "b1", port=port, http_port=port + 1,
                                 segment_bytes=8 << 20), clock=clock)
    server = await start_tcp(broker)
    housekeeping = Housekeeping(broker)
    housekeeping.start()
    client = Client(*await asyncio.open_connection("127.0.0.1", port))
    return broker, server, housekeeping, client


async def closing(broker, server, housekeeping, client) -> None:
    client.writer.close()
    await housekeeping.stop()
    server.close()
    broker.close()


def test_an_idle_broker_arms_no_timer_and_work_wakes_its_tick(tmp_path):
    async def main():
        broker, server, hk, client = await serving(tmp_path)
        loop = asyncio.get_running_loop()
        try:
            assert await client.send(b"first") == p.Code.OK
            await until(lambda: hk.idle, what="idle after a second with no work")
            assert loop.armed(within_s=3600) == []  # nothing will wake it: idle is idle
            ticks, beats = hk.ticks, broker.loop_lag.beats

            assert await client.send(b"second") == p.Code.OK  # work: the tick runs again
            assert not hk.idle
            await until(lambda: hk.idle, what="idle again")
            assert hk.ticks > ticks and broker.loop_lag.beats > beats
            assert loop.armed(within_s=3600) == []
            doc = broker.stats(history_s=10)
            assert sum(s["count"] for s in doc["history"]["send"]) == 2
        finally:
            await closing(broker, server, hk, client)

    run(main)


def test_stats_of_a_broker_gone_idle_are_brought_up_to_date(tmp_path):
    clock = ManualClock(time.time())

    async def main():
        broker, server, hk, client = await serving(tmp_path, clock)
        try:
            assert await client.send(b"x") == p.Code.OK
            clock.advance(1.0)  # the send's second ends: the tick's next look finds no work
            await until(lambda: hk.idle)
            before = broker.latest
            clock.advance(5.0)  # five seconds pass with the broker asleep
            doc = json.loads(broker.stats_json(5))  # /stats: closes the seconds since
            assert broker.latest is not before
            assert [s["ts"] for s in doc["history"]["send"]] == \
                [int(clock.t) - 5 + i for i in range(5)]
        finally:
            await closing(broker, server, hk, client)

    run(main)


def test_a_delayed_message_is_delivered_when_due_by_one_deadline(tmp_path):
    async def main():
        broker, server, hk, client = await serving(tmp_path)
        try:
            await until(lambda: hk.idle)
            runs = hk.delayed.runs
            sent = time.time()
            assert await client.send(b"later", props=with_delay({}, "1s")) == p.Code.OK
            assert hk.delayed.when is not None  # armed for when it is due, by the send
            await until(lambda: broker.store.queue_offsets("orders", 0)[1] == 1, timeout=5,
                        what="the delayed message in its queue")
            late = time.time() - sent - 1.0
            assert -0.05 <= late < 0.5, late
            assert hk.delayed.runs - runs <= 3  # at its time, not 20 passes a second
            await until(lambda: hk.idle)
            assert hk.delayed.when is None  # nothing left to deliver: nothing armed
        finally:
            await closing(broker, server, hk, client)

    run(main)


def test_the_loop_lag_is_still_seen_under_load(tmp_path):
    async def main():
        broker, server, hk, client = await serving(tmp_path)
        loop = asyncio.get_running_loop()
        try:
            loop.call_later(0.2, time.sleep, 0.08)  # the loop held 80 ms amid the sends
            end = time.monotonic() + 0.6
            while time.monotonic() < end:
                assert await client.send(b"m") == p.Code.OK
            assert broker.loop_lag.worst(5) >= 0.05
        finally:
            await closing(broker, server, hk, client)

    run(main)


def test_a_heartbeat_wakes_the_tick_for_one_look_and_no_snapshot(tmp_path):
    """A request that records nothing and changes no table (a consumer's heartbeat) is
    looked at once at the next boundary; the snapshot is not taken again for it."""
    async def main():
        broker, server, hk, client = await serving(tmp_path)
        try:
            assert await client.send(b"x") == p.Code.OK
            await until(lambda: hk.idle)
            snap, ticks = broker.latest, hk.ticks
            header, _ = await client.call(p.Op.HEARTBEAT, p.encode_json(
                {"group": "g", "topic": "orders", "client_id": "c1"}))
            assert header.code == p.Code.OK and not hk.idle
            await until(lambda: hk.idle)
            assert hk.ticks == ticks + 1 and broker.latest is snap
        finally:
            await closing(broker, server, hk, client)

    run(main)


def test_held_trace_records_are_written_when_due_though_the_broker_is_idle(tmp_path):
    """A source of trace records holding one back (a RocketMQ client's delivery awaiting
    its acknowledgement) asks for a flush when it is due: written then, by a deadline,
    with the tick asleep (the tick flushes only while the broker works)."""
    async def main():
        broker, server, hk, client = await serving(tmp_path)
        try:
            await until(lambda: hk.idle)
            held = [{"type": "deliver", "id": "m1", "group": "audit"}]
            broker.trace_store.sources.append(lambda final: [held.pop()] if held else [])
            broker.trace_store.flush_within(0.05)
            written = await until(lambda: broker.store.get(TRACE_TOPIC, 0, 0, 10).messages,
                                  timeout=5, what="the held record written")
            assert [r["id"] for r in decode_batch(written[0].body)] == ["m1"]
            assert hk.idle and hk.traces.runs == 1 and hk.traces.when is None
        finally:
            await closing(broker, server, hk, client)

    run(main)


def test_a_rocketmq_clients_request_wakes_the_tick_as_a_native_read_does(tmp_path):
    """The gRPC front end's requests are the broker's work too: their seconds are closed
    and the snapshot taken while they come."""
    import grpc

    from broker_core.grpc_front import rocketmq_v2_pb2 as pb
    from broker_core.grpc_front.service import GrpcFront

    async def main():
        broker, server, hk, client = await serving(tmp_path)
        front = GrpcFront(broker, "127.0.0.1", free_port_range(1))
        await front.start()
        try:
            await until(lambda: hk.idle)
            ticks = hk.ticks
            async with grpc.aio.insecure_channel(f"127.0.0.1:{front.port}") as channel:
                route = channel.unary_unary(
                    "/apache.rocketmq.v2.MessagingService/QueryRoute",
                    request_serializer=pb.QueryRouteRequest.SerializeToString,
                    response_deserializer=pb.QueryRouteResponse.FromString)
                answer = await route(pb.QueryRouteRequest(topic=pb.Resource(name="orders")),
                                     timeout=5)
            assert answer.status.code == pb.OK and not hk.idle
            await until(lambda: hk.idle)
            assert hk.ticks > ticks
        finally:
            await front.stop()
            await closing(broker, server, hk, client)

    run(main)
