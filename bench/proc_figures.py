"""Process figures the CPU benches read (bench/cpu_per_message.py, bench/system_cost.py,
bench/hot_path.py): CPU seconds and peak RSS from /proc, a process tree, a window of
CPU per process, a broker's /stats; and the floor, a bare uvloop server answering SEND
frames with a canned OK, and its pair: a relay that answers each frame once a second
bare server (the slave's place) has answered it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field

TICK = os.sysconf("SC_CLK_TCK")


# -- /proc ---------------------------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def peak_rss(pid: int) -> float:
    """VmHWM of a process, MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def children(pid: int) -> list[int]:
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for c in children(todo.pop()):
            out.append(c)
            todo.append(c)
    return out


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# -- the floor: a bare uvloop server -----------------------------------------------------

def answers(buf: bytearray) -> tuple[int, list[bytes]]:
    """The canned OK answer of each whole SEND or SEND_MULTI frame at the start of
    `buf` (one a message for SEND_MULTI, as a broker's), and the bytes they took."""
    from broker_core import protocol as p
    from broker_core.protocol.idempotence import ID_HEAD
    from broker_core.protocol.multi import encode_multi_answer

    host = b"\x7f\0\0\x01\0\0\0\0"
    pos, out = 0, []
    while len(buf) - pos >= p.HEADER_SIZE:
        length, _m, _v, op, flags, _r, _c, rid = p.HEADER.unpack_from(buf, pos)
        end = pos + 4 + length
        if end > len(buf):
            break
        if op == p.Op.SEND_MULTI:
            body = pos + p.HEADER_SIZE
            if flags & p.FLAG_IDEMPOTENT:  # past the producer id and sequence
                body += ID_HEAD.size
            head = body + 2 + (buf[body] << 8 | buf[body + 1])  # past the topic
            count = int.from_bytes(buf[head + 4:head + 6], "big")  # (queue id, count)
            answer = encode_multi_answer(0, 0, 0, host, 0, [0] * count, 0.0)
        else:
            answer = p.encode_send_response(0, 0, 0, 0, host)
        out.append(p.encode_frame(op, rid, answer, flags=p.FLAG_RESPONSE))
        pos = end
    return pos, out


class EchoProtocol(asyncio.Protocol):
    """Answers every SEND frame with a fixed SEND OK answer (what a broker's answer holds)."""

    def connection_made(self, transport):
        self.t, self.buf = transport, bytearray()

    def data_received(self, data):
        self.buf += data
        pos, out = answers(self.buf)
        del self.buf[:pos]
        if out:
            self.t.write(b"".join(out))


class RelayProtocol(asyncio.Protocol):
    """The floor of a sync pair: the frames of each read go on to the slave's place (one
    connection, shared) and are answered when its answer to the last comes back. The
    same wake-ups as a sync master and its slave, with none of their work."""

    slave: tuple[asyncio.Transport, dict] | None = None  # set by relay_server

    def connection_made(self, transport):
        self.t, self.buf = transport, bytearray()

    def data_received(self, data):
        self.buf += data
        pos, out = answers(self.buf)
        if out:
            from broker_core import protocol as p

            slave, waiting = RelayProtocol.slave
            last_rid = p.HEADER.unpack_from(out[-1])[7]
            waiting[last_rid] = (self.t, b"".join(out))  # the slave answers in order
            slave.write(bytes(self.buf[:pos]))
        del self.buf[:pos]


class SlaveLink(asyncio.Protocol):
    """The relay's end of its link to the slave's place: each answer sends on what
    waited for it."""

    def __init__(self, waiting: dict) -> None:
        self.waiting, self.buf = waiting, bytearray()

    def data_received(self, data):
        from broker_core import protocol as p

        buf = self.buf
        buf += data
        pos = 0
        while len(buf) - pos >= p.HEADER_SIZE:
            length, _m, _v, _op, _f, _r, _c, rid = p.HEADER.unpack_from(buf, pos)
            if pos + 4 + length > len(buf):
                break
            pos += 4 + length
            if (sender := self.waiting.pop(rid, None)) is not None:
                sender[0].write(sender[1])
        del buf[:pos]


def relay_server(port: int, slave_port: int) -> None:
    """The floor of a sync pair's master: RelayProtocol, its slave an echo_server."""
    import uvloop

    async def main():
        loop = asyncio.get_running_loop()
        waiting: dict = {}
        transport, _ = await loop.create_connection(lambda: SlaveLink(waiting), "127.0.0.1",
                                                    slave_port)
        RelayProtocol.slave = (transport, waiting)
        await serve(loop, RelayProtocol, port)

    uvloop.run(main())


async def serve(loop, protocol, port: int) -> None:
    server = await loop.create_server(protocol, "127.0.0.1", port)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()


def echo_server(port: int) -> None:
    """The floor: a bare uvloop server of EchoProtocol."""
    import uvloop

    async def main():
        await serve(asyncio.get_running_loop(), EchoProtocol, port)

    uvloop.run(main())


@contextmanager
def floor_servers(relay: bool = False):
    """The floor's server (with `relay`, the relay and its echo slave) in processes of
    their own, listening: yields (port, {"floor": pid} or {"master": pid, "slave": pid})."""
    from broker_core.cluster.ports import free_port_range

    port = free_port_range(2)
    started = {}
    try:
        if relay:
            started["slave"] = serving([__file__, "--echo", str(port + 1)], port + 1)
            started["master"] = serving([__file__, "--relay", str(port), str(port + 1)], port)
        else:
            started["floor"] = serving([__file__, "--echo", str(port)], port)
        yield port, {name: proc.pid for name, proc in started.items()}
    finally:
        for proc in started.values():
            proc.terminate()
            proc.wait(10)


def serving(argv: list[str], port: int, **popen) -> subprocess.Popen:
    """`python argv...` started, once it listens on `port`."""
    proc = subprocess.Popen([sys.executable, *argv], **popen)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return proc
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"{argv[0]} {argv[1]} never listened on {port}") from None
            time.sleep(0.05)


def peer_wake() -> None:
    """The idle floor (bench/system_cost.py): an event loop that wakes once a second for
    a 33-byte write."""
    import uvloop

    async def beat() -> None:
        a, b = socket.socketpair()
        while True:
            await asyncio.sleep(1.0)
            a.send(b"x" * 33)
            b.recv(64)

    uvloop.run(beat())


# -- measuring -----------------------------------------------------------------------------

@dataclass
class Window:
    """CPU seconds per process over a window, and what the window carried."""
    cpu: dict[str, float] = field(default_factory=dict)
    rss: dict[str, float] = field(default_factory=dict)
    msgs: int = 0
    consumed: int = 0
    seconds: float = 0.0

    def us_per_msg(self, who: str, per: int | None = None) -> float:
        n = self.msgs if per is None else per
        return self.cpu[who] / n * 1e6 if n else float("nan")


def measure(procs: dict[str, int], seconds: float, count=None, consumed=None) -> Window:
    """CPU of each named pid over `seconds`; `count()`/`consumed()` give running totals.

    Brokers count messages when they close a second (just after each wall-clock second):
    the window starts and ends half-way through a second, so both ends lag alike."""
    time.sleep((0.5 - time.time() % 1.0) % 1.0)
    seconds = round(seconds)
    c0 = {n: cpu_seconds(p) for n, p in procs.items()}
    m0, k0 = (count() if count else 0), (consumed() if consumed else 0)
    t0 = time.monotonic()
    time.sleep(seconds)
    w = Window(seconds=time.monotonic() - t0)
    w.cpu = {n: cpu_seconds(p) - c0[n] for n, p in procs.items()}
    w.rss = {n: peak_rss(p) for n, p in procs.items()}
    w.msgs = (count() if count else 0) - m0
    w.consumed = (consumed() if consumed else 0) - k0
    return w


def http_json(addr: str, path: str) -> dict:
    from broker_core.acl import tls

    url, ctx = tls.broker_http(addr, path)  # https once tls.use() named the cluster's CA
    with urllib.request.urlopen(url, timeout=5, context=ctx) as r:
        return json.loads(r.read())


def stored_msgs(http: str) -> int:
    return int(http_json(http, "/stats?history=0")["totals"]["messages_in"])


if __name__ == "__main__":  # the floor's servers (floor_servers starts them)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if len(sys.argv) < 2:  # `make bench` runs every script: this one measures nothing
        print(__doc__.splitlines()[0])
    elif sys.argv[1] == "--echo":
        echo_server(int(sys.argv[2]))
    elif sys.argv[1] == "--peer-wake":
        peer_wake()
    elif sys.argv[1] == "--relay":
        relay_server(int(sys.argv[2]), int(sys.argv[3]))
