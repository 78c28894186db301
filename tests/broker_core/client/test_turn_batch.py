"""An asyncio producer's sends of one turn ride one SEND_MULTI frame to a real broker:
each still gets its own result (offset, message id), a send alone in its turn goes as
a SEND, and delayed messages are never batched."""

from __future__ import annotations

import asyncio

from broker_core import protocol as p
from broker_core.client.aio_producer import AsyncProducer
from broker_core.client.turn_batch import MAX_MULTI
from broker_core.protocol import Code, Op


def test_a_turns_sends_ride_one_frame_each_with_its_own_result(broker_addr):
    async def main():
        async with AsyncProducer([broker_addr], fuse=False) as producer:
            results = await asyncio.gather(*(producer.send("orders", b"m%d" % i,
                                                           keys=f"order-{i}")
                                             for i in range(10)))
            assert producer.batcher.frames == 1 and producer.batcher.messages == 10
            assert {r.status for r in results} == {"SEND_OK"}
            assert len({r.msg_id for r in results}) == 10  # an id each
            assert [r.queue_offset for r in results] == \
                list(range(results[0].queue_offset, results[0].queue_offset + 10))
            alone = await producer.send("orders", b"alone")
            assert producer.batcher.frames == 2 and alone.msg_id  # a SEND of its own
            big = await asyncio.gather(*(producer.send("orders", b"x")
                                         for _ in range(MAX_MULTI + 1)))
            assert producer.batcher.frames == 4 and len(big) == MAX_MULTI + 1
            later = await asyncio.gather(producer.send("orders", b"l1", delay="1s"),
                                         producer.send("orders", b"l2", delay="1s"))
            assert producer.batcher.frames == 4  # kept aside by the broker: not batched
            assert {r.status for r in later} == {"SEND_OK"}

    asyncio.run(main())


class OlderBroker(asyncio.Protocol):
    """A broker from before SEND_MULTI, on a real socket: SEND answered stored,
    anything else BAD_REQUEST "unknown op" (as Broker.handle answers an op it lacks)."""

    def connection_made(self, transport) -> None:
        self.transport, self.decoder, self.offset = transport, p.FrameDecoder(), 0

    def data_received(self, data: bytes) -> None:
        for header, _body in self.decoder.feed(data):
            if header.op == Op.SEND:
                self.offset += 1
                self.transport.write(p.send_answer_frame(
                    header.request_id, Code.OK, 0, self.offset, 100 * self.offset, 1,
                    bytes([127, 0, 0, 1]), 1, 0.0))
            else:
                self.transport.write(p.encode_answer(header.op, header.request_id,
                                                     Code.BAD_REQUEST,
                                                     f"unknown op {header.op}".encode()))


def test_a_broker_without_send_multi_is_sent_one_by_one():
    """Its BAD_REQUEST "unknown op" to a SEND_MULTI: the messages go again as SENDs, and
    the producer sends one by one from then on."""
    async def main():
        server = await asyncio.get_running_loop().create_server(OlderBroker, "127.0.0.1", 0)
        addr = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        try:
            async with AsyncProducer([addr], fuse=False) as producer:
                first = await asyncio.gather(*(producer.send("orders", b"m")
                                               for _ in range(5)))
                assert {r.status for r in first} == {"SEND_OK"} and producer.batcher.singles
                assert len({r.queue_offset for r in first}) == 5
                again = await asyncio.gather(*(producer.send("orders", b"m")
                                               for _ in range(3)))
                assert {r.status for r in again} == {"SEND_OK"}
        finally:
            server.close()

    asyncio.run(main())


def test_with_a_linger_sends_of_several_turns_share_a_frame(broker_addr):
    async def main():
        async with AsyncProducer([broker_addr], fuse=False, linger_s=0.2) as producer:
            sends = []
            for i in range(5):  # one a turn, 10 ms apart: within the linger
                sends.append(asyncio.ensure_future(producer.send("orders", b"m%d" % i)))
                await asyncio.sleep(0.01)
            results = await asyncio.gather(*sends)
            assert producer.batcher.frames == 1 and producer.batcher.messages == 5
            assert [r.queue_offset for r in results] == \
                list(range(results[0].queue_offset, results[0].queue_offset + 5))

    asyncio.run(main())
