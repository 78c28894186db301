"""The floor of the raft/master-slave throughput ratio (issue 62): the same shapes of
hops with none of the work, in bare uvloop processes on this host.

A sync send through master/slave is client -> master -> slave -> master -> client; through
a raft group of three, client -> leader -> both followers -> leader (on the first
answer: a majority) -> client. Here a client sends 128-byte frames in a closed loop
(1 or 64 in flight) to a relay that writes each frame on to its downstreams (echo
processes that answer each frame with 8 bytes) and answers the client once `need` of
them answered: master/slave with 2 is 1 downstream of 1, with 3 is 2 of 2, raft is 2
of 1. Nothing else is done, so the ratio of raft's rate to master/slave's here is
what the host's scheduler and kernel leave for any implementation of the two shapes:
the most the real ratio could be with these processes on these cores.

    .venv/bin/python bench/raft_floor.py [--seconds 3] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench._util import peak_rss_mib, print_figures  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402

FRAME = struct.Struct(">IQ")  # length of what follows, sequence number
SHAPES = {"sync-2": (1, 1), "sync-3": (2, 2), "raft-3": (2, 1)}  # downstreams, need


def frames(buf: bytearray):
    """Yield (sequence, whole frame) of each complete frame; cut them from `buf`."""
    pos = 0
    while len(buf) - pos >= FRAME.size:
        n, seq = FRAME.unpack_from(buf, pos)
        end = pos + 4 + n
        if end > len(buf):
            break
        yield seq, bytes(buf[pos:end])
        pos = end
    del buf[:pos]


class Echo(asyncio.Protocol):
    def connection_made(self, t):
        self.t, self.buf = t, bytearray()

    def data_received(self, data):
        self.buf += data
        self.t.write(b"".join(FRAME.pack(8, seq) for seq, _f in frames(self.buf)))


class Relay(asyncio.Protocol):
    downs: list = []
    need = 1
    acks: dict = {}  # seq -> [answers so far, client transport]

    def connection_made(self, t):
        self.t, self.buf = t, bytearray()

    def data_received(self, data):
        self.buf += data
        got = list(frames(self.buf))
        for seq, _f in got:
            Relay.acks[seq] = [0, self.t]
        chunk = b"".join(f for _s, f in got)
        for down in Relay.downs:
            down.write(chunk)


class Down(asyncio.Protocol):
    def connection_made(self, t):
        self.buf = bytearray()

    def data_received(self, data):
        self.buf += data
        out: dict = {}
        for seq, _f in frames(self.buf):
            state = Relay.acks.get(seq)
            if state is None:
                continue
            state[0] += 1
            if state[0] == Relay.need:
                out.setdefault(state[1], []).append(FRAME.pack(8, seq))
            if state[0] == len(Relay.downs):
                del Relay.acks[seq]
        for t, parts in out.items():
            if not t.is_closing():  # (a client gone at the end of its round)
                t.write(b"".join(parts))


async def serve(role: str, port: int, downs: list[int], need: int) -> None:
    loop = asyncio.get_running_loop()
    if role == "relay":
        for p in downs:
            t, _ = await loop.create_connection(Down, "127.0.0.1", p)
            Relay.downs.append(t)
        Relay.need = need
    server = await loop.create_server(Echo if role == "echo" else Relay, "127.0.0.1", port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


async def client(port: int, inflight: int, seconds: float) -> float:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = b"x" * 128
    seq, done, buf = 0, 0, bytearray()
    for _ in range(inflight):
        seq += 1
        writer.write(FRAME.pack(8 + len(body), seq) + body)
    t0 = time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds:
        buf += await reader.read(65536)
        answered = sum(1 for _ in frames(buf))
        done += answered
        out = []
        for _ in range(answered):
            seq += 1
            out.append(FRAME.pack(8 + len(body), seq) + body)
        writer.write(b"".join(out))
    writer.close()
    return done / elapsed


def start(role: str, port: int, downs: list[int] = (), need: int = 1) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, __file__, "--serve", role, "--port", str(port),
                             "--downs", ",".join(map(str, downs)), "--need", str(need)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def shape_rate(shape: str, inflight: int, seconds: float) -> float:
    n, need = SHAPES[shape]
    base = free_port_range(n + 1)
    procs = [start("echo", base + 1 + i) for i in range(n)]
    procs.append(start("relay", base, [base + 1 + i for i in range(n)], need))
    try:
        import uvloop

        return uvloop.run(client(base, inflight, seconds))
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--downs", default="", help=argparse.SUPPRESS)
    ap.add_argument("--need", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        import uvloop

        downs = [int(p) for p in args.downs.split(",") if p]
        uvloop.run(serve(args.serve, args.port, downs, args.need))
        return 0
    rates: dict = {s: {1: [], 64: []} for s in SHAPES}
    for _ in range(args.rounds):  # interleaved: a noisy minute falls on every shape
        for inflight in (1, 64):
            for shape in SHAPES:
                rates[shape][inflight].append(shape_rate(shape, inflight, args.seconds))
    med = {s: {c: round(statistics.median(v)) for c, v in by.items()}
           for s, by in rates.items()}
    out = {"msgs_s": med,
           "raft_vs_sync2": {c: round(med["raft-3"][c] / med["sync-2"][c], 3) for c in (1, 64)},
           "raft_vs_sync3": {c: round(med["raft-3"][c] / med["sync-3"][c], 3) for c in (1, 64)},
           "bench_peak_rss_mib": round(peak_rss_mib(), 1)}
    print_figures(out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
