"""Delayed messages and offset reset by time, against peers in the same run.

1. Offset reset by time over a queue of `--messages` (10 M by default): the time
   search (`MessageStore.offset_at_time`, a binary search on store time, a CommitLog
   header read a step) for random times, against reading the queue's end offset
   (`queue_offsets`, a lookup) as the floor. Goal: <= 50 ms a queue.
2. A send with a delay against a plain send, through one real broker (sync sends,
   alternated rounds). Goal: <= 1.2x.
3. Delivery lateness with `--pending` delayed messages (100,000 by default) pending
   over the levels 1 m - 2 h: a paced stream of 1 s delayed sends (500 a second for
   10 s), each timed from its due time until its consumer holds it (the broker looks
   every 50 ms; the consumer's pull adds its own). Goal: p99 <= 100 ms, max <= 1 s.

    .venv/bin/python bench/delay_and_reset.py [--messages 10000000] [--pending 100000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import peak_rss_mib  # noqa: E402

from broker_core.client.consumer import Consumer  # noqa: E402
from broker_core.client.producer import Producer  # noqa: E402
from broker_core.cluster.launcher import Cluster  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402
from broker_core.protocol.delay import LABELS  # noqa: E402
from broker_core.store import MessageStore, StoreConfig  # noqa: E402
from heatmap import LatencyHistogram  # noqa: E402


def reset_by_time(messages: int) -> dict:
    batch = 1000
    with tempfile.TemporaryDirectory(prefix="floodgate-reset-") as tmp:
        t = [1_700_000_000.0]
        store = MessageStore(Path(tmp) / "s", StoreConfig(
            background_services=False, clock=lambda: t[0],
            commitlog_segment_bytes=1 << 30))
        t0 = time.perf_counter()
        for _ in range(messages // batch):
            store.put_batch("big", 0, [b"x" * 16] * batch, wait=False)
            t[0] += 0.05  # 20,000 messages a second of store time
        fill_s = time.perf_counter() - t0
        first, last = t[0] - messages / batch * 0.05, t[0]
        times = [int(random.uniform(first, last) * 1000) for _ in range(200)]
        search, lookup = [], []
        for ms in times:
            s0 = time.perf_counter()
            store.offset_at_time("big", 0, ms)
            search.append(time.perf_counter() - s0)
            s0 = time.perf_counter()
            store.queue_offsets("big", 0)
            lookup.append(time.perf_counter() - s0)
        store.close()
    return {"messages": messages, "fill_s": round(fill_s, 1),
            "search_ms_median": round(statistics.median(search) * 1000, 3),
            "search_ms_max": round(max(search) * 1000, 3),
            "end_lookup_us_median": round(statistics.median(lookup) * 1e6, 2)}


def send_cost(addrs: dict, rounds: int = 5, sends: int = 2000) -> dict:
    rates: dict[str, list[float]] = {"plain": [], "delayed": []}
    with Producer(addrs, fuse=False) as p:
        for _ in range(rounds):
            for kind in ("plain", "delayed"):
                delay = "2h" if kind == "delayed" else None  # not due within the bench
                t0 = time.perf_counter()
                for _ in range(sends):
                    p.send("cost", b"m" * 128, delay=delay)
                rates[kind].append(sends / (time.perf_counter() - t0))
    plain, delayed = statistics.median(rates["plain"]), statistics.median(rates["delayed"])
    return {"plain_per_s": round(plain), "delayed_per_s": round(delayed),
            "delayed_cost_ratio": round(plain / delayed, 3)}


def lateness(addrs: dict, pending: int, rate: float = 500.0, seconds: float = 10.0) -> dict:
    """`pending` delayed messages over the levels 1 m - 2 h (they stay pending), then a
    paced stream of 1 s ones: how late after due each of those reaches its consumer."""
    long_levels = LABELS[4:]
    with Producer(addrs, fuse=False) as p:
        t0 = time.perf_counter()
        for start in range(0, pending, 1000):  # in chunks: the broker is not flooded
            futs = [p.send_async("late", b"p%d" % i, delay=long_levels[i % len(long_levels)])
                    for i in range(start, min(pending, start + 1000))]
            for f in futs:
                f.result(60)
        load_s = time.perf_counter() - t0
        due: dict[bytes, float] = {}
        hist, got, stop = LatencyHistogram(), [0], threading.Event()

        def read() -> None:  # running before the first due send, as a live consumer is
            with Consumer("late-reader", "late", addrs) as c:
                while not stop.is_set():
                    for m in c.poll(256, timeout=0.1):
                        when = due.get(m.body)
                        if when is not None:
                            hist.record(max(0.0, time.time() - when))
                            got[0] += 1

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        time.sleep(3)  # joined, owning every queue
        t0 = time.monotonic()
        for i in range(int(rate * seconds)):
            wait = t0 + i / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            body = b"d%d" % i
            due[body] = time.time() + 1  # at most this: stored a moment after
            due[body] = p.send("late", body, delay="1s").store_ms / 1000 + 1
        deadline = time.monotonic() + 30
        while got[0] < len(due) and time.monotonic() < deadline:
            time.sleep(0.1)
        stop.set()
        reader.join(10)
        got = got[0]
    return {"pending": pending, "pending_load_s": round(load_s, 1), "due_in_run": len(due),
            "delivered": got, "late_ms_p50": round((hist.quantile(0.5) or 0) * 1000, 1),
            "late_ms_p99": round((hist.quantile(0.99) or 0) * 1000, 1),
            "late_ms_max": round((hist.max or 0) * 1000, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=10_000_000)
    ap.add_argument("--pending", type=int, default=100_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = {"reset_by_time": reset_by_time(args.messages)}
    with tempfile.TemporaryDirectory(prefix="floodgate-delay-") as tmp:
        cluster = Cluster(1, free_port_range(2), Path(tmp) / "c", flush="async")
        cluster.up()
        try:
            out["send_cost"] = send_cost(cluster.file.addrs)
            out["lateness"] = lateness(cluster.file.addrs, args.pending)
            pid = cluster.procs[cluster.file.brokers[0].name].pid
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    out["broker_peak_rss_mib"] = round(int(line.split()[1]) / 1024)
        finally:
            cluster.down()
    out["bench_peak_rss_mib"] = round(peak_rss_mib())
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
