"""The floor of a consumer's delay: a stamped frame through two bare uvloop processes.

A message's way from a producer's send to a consumer's hand, with sync replication,
is four hops at least: producer -> master -> slave -> master (the message is
visible once the slave has it) -> consumer. This sends a time-stamped 150-byte frame
every `1/rate` s from this process through `--hops` - 1 relays (each writes what it
reads on at once) to a sink, which records now - stamp. Nothing else is done, so its delay
is what the host's scheduler alone costs such a chain; run beside the demo (at the
demo's priority: nice 0), it says how much of the consumer's delay any Python
process would pay there.

    .venv/bin/python bench/wake_chain.py [--rate 1250] [--seconds 30] [--hops 2]   (prints JSON)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STAMP = struct.Struct(">d")
FRAME = 150  # a demo message's size on the wire, about


async def relay(port: int, sink_port: int) -> None:
    _r, out = await asyncio.open_connection("127.0.0.1", sink_port)

    async def forward(reader, _writer) -> None:
        while data := await reader.read(65536):
            out.write(data)

    await serve(port, forward)


async def sink(port: int) -> None:
    from heatmap import LatencyHistogram

    hist = LatencyHistogram()

    async def record(reader, _writer) -> None:
        buf = b""
        while data := await reader.read(65536):
            now = time.time()
            buf += data
            while len(buf) >= FRAME:
                hist.record(max(0.0, now - STAMP.unpack_from(buf)[0]))
                buf = buf[FRAME:]

    await serve(port, record)
    print(json.dumps({"p50_ms": round(hist.quantile(0.5) * 1000, 2),
                      "p99_ms": round(hist.quantile(0.99) * 1000, 2),
                      "max_ms": round(hist.max * 1000, 2), "count": hist.count}), flush=True)


async def serve(port: int, handler) -> None:
    async def handle(reader, writer) -> None:
        try:
            await handler(reader, writer)
        except (asyncio.CancelledError, ConnectionError):
            pass  # stopped, or the writer went first

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()


async def source(port: int, rate: float, seconds: float) -> None:
    _r, w = await asyncio.open_connection("127.0.0.1", port)
    pad = b"x" * (FRAME - STAMP.size)
    t0 = time.monotonic()
    n = 0
    while (due := t0 + n / rate) < t0 + seconds:
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        w.write(STAMP.pack(time.time()) + pad)
        n += 1
    await w.drain()


class Chain:
    """The relays and the sink, started (and their imports done) before what they are
    measured beside; `send` runs the source here; `stop` the chain's delay (a dict)."""

    def __init__(self, hops: int = 2) -> None:
        from proc_figures import serving

        from broker_core.cluster.ports import free_port_range

        self.hops, self.port = hops, free_port_range(hops)
        last = self.port + hops - 1
        self.sink = serving([__file__, "--sink", str(last)], last, stdout=subprocess.PIPE,
                            text=True)
        self.relays = [serving([__file__, "--relay", str(self.port + i),
                                str(self.port + i + 1)], self.port + i)
                       for i in reversed(range(hops - 1))]

    def send(self, rate: float, seconds: float) -> None:
        import uvloop

        uvloop.run(source(self.port, rate, seconds))
        time.sleep(0.2)  # the last frames' way through

    def stop(self) -> dict:
        for proc in self.relays:
            proc.terminate()
            proc.wait(10)
        self.sink.terminate()
        out, _ = self.sink.communicate(timeout=10)
        return {"hops": self.hops, **json.loads(out)}


def run(rate: float, seconds: float, hops: int = 2) -> dict:
    """The chain's delay over `seconds` at `rate` frames a second (a dict of ms), through
    `hops` - 1 relays (a sync send seen by a consumer: producer -> master -> slave ->
    master -> consumer, four)."""
    chain = Chain(hops)
    try:
        chain.send(rate, seconds)
    finally:
        out = chain.stop()
    return out


def main() -> int:
    import uvloop

    if sys.argv[1:2] == ["--relay"]:
        uvloop.run(relay(int(sys.argv[2]), int(sys.argv[3])))
        return 0
    if sys.argv[1:2] == ["--sink"]:
        uvloop.run(sink(int(sys.argv[2])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=1250.0, help="frames a second (a master's "
                    "share of the demo's 5,000 msgs/s)")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--hops", type=int, default=2)
    args = ap.parse_args()
    print(json.dumps(run(args.rate, args.seconds, args.hops)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
