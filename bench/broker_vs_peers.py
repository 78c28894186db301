"""floodgate's broker against NATS JetStream and Redis Streams, in one run.

Same load design on every side, Python clients everywhere (floodgate's own,
nats-py, redis-py), one server process each on loopback, matched durability:
floodgate flush=async (page cache, flushed every 500 ms), Redis appendonly
with appendfsync everysec, JetStream file storage with one replica
(nats-server 2.9's default background sync). Phases:

1. single-message sync sends, one client: msgs/s;
2. batched / pipelined: floodgate SEND_BATCH of 100, Redis pipelines of 100
   XADD, JetStream 100 publishes in flight: msgs/s;
3. open loop at `--rate` msgs/s offered for `--latency-seconds`: p50/p99/max RT
   (asyncio pacing, one task per message, the same code for all three).

Goals (issue 4): sync >= 3x the faster peer's sync; batched >= the faster
peer's pipelined; at 10,000 msgs/s: average <= 1 ms and max <= 20 ms.
Throughput phases run interleaved (each round measures all three in turn) and
report the median round.

    .venv/bin/python bench/broker_vs_peers.py [--seconds 5] [--latency-seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _util import peak_rss_mib  # noqa: E402

from heatmap import LatencyHistogram  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


# -- servers ------------------------------------------------------------------

def start_floodgate(tmp: Path):
    port, http = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "console.cli", "broker", "serve", "--name", "bench",
         "--data", str(tmp / "floodgate"), "--port", str(port), "--http-port", str(http),
         "--segment-size", "256M", "--busy-after-ms", "5000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(http)
    return proc, port


def start_redis(tmp: Path):
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp),
         "--appendonly", "yes", "--appendfsync", "everysec", "--save", ""],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return proc, port


def start_nats(tmp: Path):
    port = free_port()
    conf = tmp / "nats.conf"
    # Debian's nats-server 2.9 has no sync_interval: JetStream writes through the
    # page cache and syncs in the background, the same class as the other two.
    conf.write_text(f'port: {port}\nhost: 127.0.0.1\njetstream {{ store_dir: "{tmp / "js"}" }}\n')
    proc = subprocess.Popen(["nats-server", "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_port(port)
    return proc, port


# -- clients: the same three operations on every side ---------------------------

class FloodgateSide:
    name = "floodgate"

    def __init__(self, port: int) -> None:
        from broker_core.client.producer import Producer

        self.addr = f"127.0.0.1:{port}"
        self.producer = Producer([self.addr], fuse=False, timeout=10)
        self.aio = None  # AsyncProducer, made on the open-loop phase's event loop

    def sync(self, body: bytes) -> None:
        self.producer.send("bench", body)

    def batch(self, body: bytes, n: int) -> None:
        self.producer.send_batch("bench", [body] * n)

    async def one_async(self, body: bytes) -> None:
        if self.aio is None:
            from broker_core.client.aio_producer import AsyncProducer

            self.aio = AsyncProducer([self.addr], fuse=False, timeout=10)
        await self.aio.send("bench", body)

    def close(self) -> None:
        self.producer.close()


class RedisSide:
    name = "redis-streams"

    def __init__(self, port: int) -> None:
        import redis
        import redis.asyncio as aredis

        self.r = redis.Redis(port=port)
        self.ar = aredis.Redis(port=port)

    def sync(self, body: bytes) -> None:
        self.r.xadd("bench", {"b": body})

    def batch(self, body: bytes, n: int) -> None:
        pipe = self.r.pipeline(transaction=False)
        for _ in range(n):
            pipe.xadd("bench", {"b": body})
        pipe.execute()

    async def one_async(self, body: bytes) -> None:
        await self.ar.xadd("bench", {"b": body})

    def close(self) -> None:
        self.r.close()


class NatsSide:
    name = "nats-jetstream"

    def __init__(self, port: int) -> None:
        self.port = port
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self._connect())

    async def _connect(self) -> None:
        import nats

        self.nc = await nats.connect(f"nats://127.0.0.1:{self.port}")
        self.js = self.nc.jetstream()
        await self.js.add_stream(name="BENCH", subjects=["bench"], storage="file", num_replicas=1)

    def sync(self, body: bytes) -> None:
        self.loop.run_until_complete(self.js.publish("bench", body))

    def batch(self, body: bytes, n: int) -> None:
        async def many():
            await asyncio.gather(*(self.js.publish("bench", body) for _ in range(n)))

        self.loop.run_until_complete(many())

    async def one_async(self, body: bytes) -> None:
        await self.js.publish("bench", body)

    def close(self) -> None:
        self.loop.run_until_complete(self.nc.close())


# -- phases -----------------------------------------------------------------------

def rate_of(fn, seconds: float, per_call: int = 1) -> float:
    fn()  # warm up
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        n += per_call
    return n / (time.perf_counter() - t0)


async def open_loop(side, body: bytes, rate: float, seconds: float) -> dict:
    hist = LatencyHistogram()
    errors = 0
    pending = set()
    window = asyncio.Semaphore(256)  # at most 256 in flight on every side

    async def one(t_sched: float) -> None:
        nonlocal errors
        try:
            async with window:
                await side.one_async(body)
            hist.record(time.perf_counter() - t_sched)  # from the planned time: no omission
        except Exception:  # noqa: BLE001 - counted
            errors += 1

    start = time.perf_counter()
    total = int(rate * seconds)
    for i in range(total):
        due = start + i / rate
        # always yield: completions must be handled while the pacing runs behind
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        task = asyncio.ensure_future(one(due))
        pending.add(task)
        task.add_done_callback(pending.discard)
    await asyncio.gather(*pending)
    return {"offered_per_s": rate, "sent": total, "errors": errors, "in_flight_max": 256,
            "mean_ms": (hist.mean or 0) * 1e3, "p50_ms": (hist.quantile(0.5) or 0) * 1e3,
            "p99_ms": (hist.quantile(0.99) or 0) * 1e3, "max_ms": (hist.max or 0) * 1e3}


def measure(sides: list, args) -> dict[str, dict]:
    """Throughput phases interleaved: every round runs each side once, so a load
    swing on this shared machine hits all three alike; the median round counts."""
    out: dict[str, dict] = {side.name: {} for side in sides}
    for size in (128, 1024):
        body = b"x" * size
        phases = (("sync", lambda side, b=body: rate_of(lambda: side.sync(b), args.seconds)),
                  ("batched", lambda side, b=body: rate_of(lambda: side.batch(b, 100),
                                                           args.seconds, 100)))
        for phase, run in phases:
            rounds: dict[str, list[float]] = {side.name: [] for side in sides}
            for _ in range(args.rounds):
                for side in sides:
                    rounds[side.name].append(run(side))
            for side in sides:
                out[side.name][f"{phase}_{size}B_msgs_per_s"] = statistics.median(
                    rounds[side.name])
    if args.latency_seconds:
        for side in sides:
            loop = getattr(side, "loop", None) or asyncio.new_event_loop()
            out[side.name]["open_loop_128B"] = loop.run_until_complete(
                open_loop(side, b"x" * 128, args.rate, args.latency_seconds))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="per throughput measurement")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per phase")
    ap.add_argument("--latency-seconds", type=float, default=60.0)
    ap.add_argument("--rate", type=float, default=10_000.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    missing = [b for b in ("redis-server", "nats-server") if not shutil.which(b)]
    if missing:
        print(f"missing peers: {', '.join(missing)} (make bench installs them)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="fg-bench-") as tmpdir:
        tmp = Path(tmpdir)
        procs, sides = [], []
        try:
            for start, side_cls in ((start_floodgate, FloodgateSide), (start_redis, RedisSide),
                                    (start_nats, NatsSide)):
                proc, port = start(tmp)
                procs.append(proc)
                sides.append(side_cls(port))
            results = measure(sides, args)
        finally:
            for side in sides:
                side.close()
            for proc in procs:
                proc.terminate()
                proc.wait(20)
    fg, peers = results["floodgate"], [results["redis-streams"], results["nats-jetstream"]]
    best_sync = max(p["sync_128B_msgs_per_s"] for p in peers)
    best_batch = max(p["batched_128B_msgs_per_s"] for p in peers)
    summary = {
        "sync_vs_faster_peer": fg["sync_128B_msgs_per_s"] / best_sync,
        "batched_vs_faster_peer": fg["batched_128B_msgs_per_s"] / best_batch,
        "peak_rss_mib_client": peak_rss_mib(),
    }
    results["summary"] = summary
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for name, r in results.items():
            if name == "summary":
                continue
            print(f"{name:15s} sync 128B {r['sync_128B_msgs_per_s']:9,.0f}/s  1KiB "
                  f"{r['sync_1024B_msgs_per_s']:9,.0f}/s | batched 128B "
                  f"{r['batched_128B_msgs_per_s']:9,.0f}/s  1KiB {r['batched_1024B_msgs_per_s']:9,.0f}/s")
            if "open_loop_128B" in r:
                o = r["open_loop_128B"]
                print(f"{'':15s} open loop {o['offered_per_s']:,.0f}/s: mean {o['mean_ms']:.2f} ms "
                      f"p50 {o['p50_ms']:.2f} p99 {o['p99_ms']:.2f} max {o['max_ms']:.2f} ms "
                      f"errors {o['errors']}")
        print(f"sync vs faster peer {summary['sync_vs_faster_peer']:.2f}x (goal >= 3x); batched "
              f"vs faster peer {summary['batched_vs_faster_peer']:.2f}x (goal >= 1x); client "
              f"peak RSS {summary['peak_rss_mib_client']:.0f} MiB")
    ol = fg.get("open_loop_128B")
    ok = (summary["sync_vs_faster_peer"] >= 3 and summary["batched_vs_faster_peer"] >= 1
          and (ol is None or (ol["mean_ms"] <= 1 and ol["max_ms"] <= 20)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
