"""What RocketMQ's gRPC protocol costs a send (issue 63): RocketMQ's official Python client
through a broker's gRPC front end against floodgate's own Python client on its native
protocol, the same broker, the same load, in one run; and the native protocol's rate
with the front end switched on against a broker without it.

Closed loops of 128-byte sends for `--seconds` each, interleaved rounds, median: one in
flight (a sync send at a time) and 32 in flight (futures, refilled as each completes).
Goals: gRPC >= 50 % of native at both; native with the front end on >= 95 % of native
without it. The peer that says what is reachable (bench/grpc_echo.py): a gRPC server that
answers each SendMessage at once, no broker behind it, driven by a lean grpc.aio client,
served by grpc.aio (as the front end is) and by a thread pool.

    .venv/bin/python bench/grpc_front.py [--seconds 3] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import FIRST_COMPLETED, wait
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._util import peak_rss_mib, print_figures  # noqa: E402
from bench.grpc_echo import echo_rate  # noqa: E402
from bench.proc_figures import cpu_seconds  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402

BODY = b"x" * 128


def start_broker(data: Path, grpc: bool) -> tuple[subprocess.Popen, int]:
    base = free_port_range(3)
    argv = [sys.executable, "-m", "broker_core", "broker", "--name", data.name, "--data",
            str(data), "--port", str(base), "--http-port", str(base + 1), "--segment-size",
            "256M", *(["--grpc-port", str(base + 2)] if grpc else [])]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{base + 1}/stats", timeout=2).read()
            return proc, base
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("the broker did not come up") from None
            time.sleep(0.1)


def start_echo(threads: bool) -> tuple[subprocess.Popen, int]:
    port = free_port_range(1)
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "grpc_echo.py"), "serve",
                             str(port), *(["--threads"] if threads else [])])
    deadline = time.monotonic() + 30
    while True:
        try:
            echo_rate(port, 1, 0.0)
            return proc, port
        except Exception:  # noqa: BLE001 (grpc's errors: not up yet)
            if time.monotonic() > deadline:
                raise SystemExit("the echo server did not come up") from None
            time.sleep(0.2)


def costed(pid: int, cpu: list, rate_fn, *args) -> float:
    """`rate_fn(*args)`, adding to `cpu` the CPU process `pid` spent a send meanwhile
    (its client's start included)."""
    before, t0 = cpu_seconds(pid), time.perf_counter()
    rate = rate_fn(*args)
    cpu.append((cpu_seconds(pid) - before) / (rate * (time.perf_counter() - t0)))
    return rate


def closed_loop(send_async, inflight: int, seconds: float) -> float:
    done, pending, t0 = 0, set(), time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds:
        while len(pending) < inflight:
            pending.add(send_async())
        finished, pending = wait(pending, return_when=FIRST_COMPLETED)
        for f in finished:
            f.result()
        done += len(finished)
    wait(pending)
    return done / elapsed


def native_rate(port: int, inflight: int, seconds: float) -> float:
    from broker_core.client.producer import Producer

    with Producer([f"127.0.0.1:{port}"], fuse=False) as producer:
        producer.send("bench", BODY)  # (the route, the connection: made before timing)
        return closed_loop(lambda: producer.send_async("bench", BODY), inflight, seconds)


def grpc_rate(port: int, inflight: int, seconds: float) -> float:
    from rocketmq import ClientConfiguration, Credentials, Message, Producer

    producer = Producer(ClientConfiguration(f"127.0.0.1:{port}", Credentials(),
                                            request_timeout=10), ("bench",))
    producer.startup()

    def one():
        m = Message()
        m.topic, m.body = "bench", BODY
        return producer.send_async(m)

    try:
        one().result()
        return closed_loop(one, inflight, seconds)
    finally:
        producer.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fg-grpc-") as tmp:
        os.environ["HOME"] = tmp  # (RocketMQ's client writes its logs under ~/logs)
        with_front, port = start_broker(Path(tmp) / "front", grpc=True)
        bare, bare_port = start_broker(Path(tmp) / "bare", grpc=False)
        echo_aio, aio_port = start_echo(threads=False)
        echo_pool, pool_port = start_echo(threads=True)
        runs: dict = {k: {1: [], 32: []} for k in ("grpc", "native", "native_no_front",
                                                   "echo_aio", "echo_threads")}
        # the server's CPU a send: the broker through gRPC and native, servers doing nothing
        cpu: dict = {k: {1: [], 32: []} for k in ("broker_grpc", "broker_native", "echo_aio",
                                                   "echo_threads")}
        try:
            for _ in range(args.rounds):
                for c in (1, 32):
                    for run, pid, rate_fn, at in (
                            ("grpc", with_front.pid, grpc_rate, port + 2),
                            ("native", with_front.pid, native_rate, port),
                            ("native_no_front", None, native_rate, bare_port),
                            ("echo_aio", echo_aio.pid, echo_rate, aio_port),
                            ("echo_threads", echo_pool.pid, echo_rate, pool_port)):
                        if pid is None:
                            runs[run][c].append(rate_fn(at, c, args.seconds))
                            continue
                        key = {"grpc": "broker_grpc", "native": "broker_native"}.get(run, run)
                        runs[run][c].append(costed(pid, cpu[key][c], rate_fn, at, c,
                                                   args.seconds))
        finally:
            for proc in (with_front, bare, echo_aio, echo_pool):
                proc.terminate()
                proc.wait(30)
    med = {k: {c: round(statistics.median(v)) for c, v in by.items()} for k, by in runs.items()}
    out = {"msgs_s": med,
           "grpc_vs_native": {c: round(med["grpc"][c] / med["native"][c], 3) for c in (1, 32)},
           # what gRPC alone allows in Python: a server doing nothing, over native
           "echo_floor_vs_native": {c: {"aio": round(med["echo_aio"][c] / med["native"][c], 3),
                                        "threads": round(med["echo_threads"][c]
                                                         / med["native"][c], 3)}
                                    for c in (1, 32)},
           "grpc_vs_echo_aio": {c: round(med["grpc"][c] / med["echo_aio"][c], 3)
                                for c in (1, 32)},
           # the server's CPU a send at 32 in flight: the broker through gRPC, and a server
           # that does nothing but gRPC
           "server_cpu_us_a_send": {k: {c: round(statistics.median(v) * 1e6) for c, v in by.items()}
                                    for k, by in cpu.items()},
           "native_front_on_vs_off": {c: round(med["native"][c] / med["native_no_front"][c], 3)
                                      for c in (1, 32)},
           "bench_peak_rss_mib": round(peak_rss_mib(), 1)}
    out["goals"] = {"grpc >= 50 % of native": all(v >= 0.5 for v in
                                                  out["grpc_vs_native"].values()),
                    "native unchanged (>= 95 %) with the front end on": all(
                        v >= 0.95 for v in out["native_front_on_vs_off"].values())}
    print_figures(out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
