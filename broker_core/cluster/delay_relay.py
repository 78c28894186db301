"""A delaying TCP relay: the `--delay MS` of `floodgate fault net`.

This kernel has no netem, so delay is made in user space: the relay runs in the
slow node's namespace, an nftables `redirect` sends the TCP connections made to
the node's ports to it, and it forwards each chunk to where the connection was
going (SO_ORIGINAL_DST) MS milliseconds after reading it, in both directions.
Order is kept (every chunk waits the same); throughput is not limited. What it
cannot delay, said plainly: connections the node makes itself (to ZooKeeper, or
a slave's to its master) and packets rather than stream chunks.

    python -m broker_core.cluster.delay_relay --listen ADDR:PORT --delay-ms MS
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import struct

SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h


def original_dst(sock: socket.socket) -> tuple[str, int]:
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port = struct.unpack_from(">H", raw, 2)[0]
    return socket.inet_ntoa(raw[4:8]), port


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                delay_s: float) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    async def send() -> None:
        while True:
            due, chunk = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not chunk:
                with contextlib.suppress(OSError):
                    writer.write_eof()
                return
            writer.write(chunk)
            await writer.drain()

    sender = asyncio.ensure_future(send())
    try:
        while True:
            chunk = await reader.read(65536)
            queue.put_nowait((loop.time() + delay_s, chunk))
            if not chunk:
                break
        await sender
    except (ConnectionError, OSError):
        sender.cancel()
    finally:
        writer.close()


async def serve(host: str, port: int, delay_s: float) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        try:
            dst = original_dst(sock)
            up_reader, up_writer = await asyncio.open_connection(*dst)
        except OSError:
            writer.close()
            return
        for s in (sock, up_writer.get_extra_info("socket")):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(_pump(reader, up_writer, delay_s),
                             _pump(up_reader, writer, delay_s), return_exceptions=True)

    server = await asyncio.start_server(handle, host, port, reuse_address=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--listen", required=True, metavar="ADDR:PORT")
    ap.add_argument("--delay-ms", type=float, required=True)
    args = ap.parse_args()
    host, _, port = args.listen.rpartition(":")
    asyncio.run(serve(host, int(port), args.delay_ms / 1000))


if __name__ == "__main__":
    main()
