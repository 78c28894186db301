"""Process figures the CPU benches read (bench/cpu_per_message.py, bench/system_cost.py,
bench/hot_path.py): CPU seconds and peak RSS from /proc, a process tree, a window of
CPU per process, a broker's /stats; and the floor, a bare uvloop server answering SEND
frames with a canned OK."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import urllib.request
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

class EchoProtocol(asyncio.Protocol):
    """Answers every SEND frame with a fixed SEND OK answer (what a broker's answer holds)."""

    def __init__(self) -> None:
        from broker_core import protocol as p

        self.p = p
        self.answer = p.encode_send_response(0, 0, 0, 0, b"\x7f\0\0\x01\0\0\0\0")

    def connection_made(self, transport):
        self.t, self.buf = transport, bytearray()

    def data_received(self, data):
        p, buf = self.p, self.buf
        buf += data
        out = []
        pos = 0
        while len(buf) - pos >= p.HEADER_SIZE:
            length, _m, _v, op, _f, _r, _c, rid = p.HEADER.unpack_from(buf, pos)
            end = pos + 4 + length
            if end > len(buf):
                break
            out.append(p.encode_frame(op, rid, self.answer, flags=p.FLAG_RESPONSE))
            pos = end
        del buf[:pos]
        if out:
            self.t.write(b"".join(out))


def echo_server(port: int) -> None:
    """The floor: a bare uvloop server of EchoProtocol."""
    import uvloop

    async def main():
        loop = asyncio.get_running_loop()
        server = await loop.create_server(EchoProtocol, "127.0.0.1", port)
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        async with server:
            await stop.wait()

    uvloop.run(main())


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
