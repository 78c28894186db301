"""The TCP server in-process on a real socket: a client that sends half a frame
and stops (slow loris) is answered BAD_REQUEST and disconnected once the frame is
older than `frame_timeout_s`, and the server keeps serving everyone else. The reaper
is armed by the half frame itself: nothing wakes for it before."""

from __future__ import annotations

import asyncio

import pytest

from broker_core import protocol as p
from broker_core.cluster.ports import free_port_range
from broker_core.server.broker import Broker, BrokerConfig
from broker_core.server.housekeeping import Housekeeping
from broker_core.server.tcp import start_tcp

pytestmark = pytest.mark.timeout(30)


async def read_frame(reader: asyncio.StreamReader) -> tuple[p.Header, bytes]:
    head = await reader.readexactly(p.HEADER_SIZE)
    header = p.decode_header(head)
    rest = await reader.readexactly(p.LENGTH_SIZE + header.length - p.HEADER_SIZE)
    return header, rest


def test_half_a_frame_held_too_long_is_disconnected_and_others_are_served(tmp_path):
    port = free_port_range(2)
    broker = Broker(BrokerConfig("b1", tmp_path / "b1", port=port, http_port=port + 1,
                                 segment_bytes=8 << 20, frame_timeout_s=0.3))

    async def run():
        server = await start_tcp(broker)
        housekeeping = Housekeeping(broker)
        housekeeping.start()
        try:
            assert housekeeping.reaper.when is None
            loris_r, loris_w = await asyncio.open_connection("127.0.0.1", port)
            loris_w.write(p.encode_frame(p.Op.SEND, 1, b"x" * 100)[:20])
            await asyncio.sleep(0.1)  # the half frame is read: the reaper is armed for it
            assert housekeeping.reaper.when is not None
            honest_r, honest_w = await asyncio.open_connection("127.0.0.1", port)
            header, body = await asyncio.wait_for(read_frame(loris_r), 5)
            assert header.code == p.Code.BAD_REQUEST and b"incomplete frame" in body
            assert await loris_r.read() == b""  # and closed
            send = p.encode_send("orders", 0, p.OutMessage(b"still served"))
            honest_w.write(p.encode_frame(p.Op.SEND, 2, send))
            header, _ = await asyncio.wait_for(read_frame(honest_r), 5)
            assert header.code == p.Code.OK
            honest_w.close()
            assert housekeeping.reaper.runs == 1  # once, at the loris's time
        finally:
            await housekeeping.stop()
            server.close()

    try:
        asyncio.run(run())
    finally:
        broker.close()
    assert broker.counters["connections_closed_bad"] == 1
