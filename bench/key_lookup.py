"""Key lookup over a day of messages: the key index (store/index_file.py) against the
by-offset read the store already had, in the same run on the same store.

A store is filled through its API (`MessageStore.put`, no broker, no TCP) with N
messages (default 10 M) keyed order-1 .. order-N, on an injected clock spread over
24 hours, so the index holds one file per hour. Then random keys are looked up
(every file probed: no time range), and the same messages are read by their queue
and offset (`store.get`) as the peer. Prints medians, p99 and peak RSS; `--json`.

    python bench/key_lookup.py [--messages 10000000] [--lookups 2000] [--dir DIR]
"""

from __future__ import annotations

import argparse
import array
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from _util import peak_rss_mib  # noqa: E402

from broker_core.store import MessageStore, StoreConfig  # noqa: E402

DAY_S = 86400.0
T0 = 1_794_355_200.0  # 2026-11-11 00:00 UTC


def fill(store, n: int, clock: list[float], queues: int) -> array.array:
    """Put n keyed messages over a day; returns each one's queue offset (its queue is
    i % queues): a compact array, not 10 M tuples (a gigabyte of RSS in the bench)."""
    step = DAY_S / n
    where = array.array("q")
    body = b"p" * 16
    t0 = time.perf_counter()
    for i in range(1, n + 1):
        clock[0] = T0 + i * step
        r = store.put("orders", i % queues, body, keys=f"order-{i}")
        where.append(r.queue_offset)
        if i % 1_000_000 == 0:
            rate = i / (time.perf_counter() - t0)
            print(f"  {i:,} put ({rate:,.0f}/s)", file=sys.stderr)
    return where


def timed(fn, items) -> list[float]:
    out = []
    for item in items:
        t0 = time.perf_counter()
        fn(item)
        out.append(time.perf_counter() - t0)
    return out


def summary(samples: list[float]) -> dict:
    s = sorted(samples)
    return {"median_ms": statistics.median(s) * 1000, "p99_ms": s[int(len(s) * 0.99)] * 1000,
            "max_ms": s[-1] * 1000}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=10_000_000)
    ap.add_argument("--lookups", type=int, default=2000)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--dir", help="store directory (default: a temporary one, removed)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    path = args.dir or tempfile.mkdtemp(prefix="floodgate-keylookup-")
    clock = [T0]
    config = StoreConfig(commitlog_segment_bytes=1 << 30, background_services=False,
                         clock=lambda: clock[0], index_slots=1 << 20,
                         index_entries=args.messages // 24 + 1000, index_span_s=3600.0,
                         timed_ops=())
    try:
        store = MessageStore(path, config)
        t0 = time.perf_counter()
        where = fill(store, args.messages, clock, args.queues)
        fill_s = time.perf_counter() - t0
        rng = random.Random(1)
        picks = [rng.randrange(1, args.messages + 1) for _ in range(args.lookups)]

        def by_key(i):
            got = store.query_by_key(f"order-{i}", topic="orders").messages
            assert len(got) == 1 and got[0].keys == f"order-{i}", (i, got)

        def by_key_hour(i):  # an SRE who knows roughly when: a one-hour window
            ts = int((T0 + i * DAY_S / args.messages) * 1000)
            got = store.query_by_key(f"order-{i}", begin_ms=ts - 1_800_000,
                                     end_ms=ts + 1_800_000).messages
            assert len(got) == 1

        def by_offset(i):
            got = store.get("orders", i % args.queues, where[i - 1], 1).messages
            assert got[0].keys == f"order-{i}"

        timed(by_key, picks[:100])  # warm the page cache the way a live broker has it
        out = {
            "messages": args.messages, "index_files": len(store.index.files),
            "index_entries": store.index.entries, "fill_s": fill_s,
            "by_key_day": summary(timed(by_key, picks)),
            "by_key_hour": summary(timed(by_key_hour, picks)),
            "by_offset_peer": summary(timed(by_offset, picks)),
            "peak_rss_mib": peak_rss_mib(),
            "index_bytes": sum(os.path.getsize(f.path) for f in store.index.files),
        }
        store.close()
    finally:
        if not args.dir:
            shutil.rmtree(path, ignore_errors=True)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{out['messages']:,} messages over 24 h, {out['index_files']} index files, "
              f"{out['index_bytes'] / 2**20:,.0f} MiB of index; filled in {fill_s:,.0f} s")
        for name in ("by_key_day", "by_key_hour", "by_offset_peer"):
            s = out[name]
            print(f"  {name:15s} median {s['median_ms']:.3f} ms  p99 {s['p99_ms']:.3f} ms  "
                  f"max {s['max_ms']:.3f} ms")
        print(f"  peak RSS {out['peak_rss_mib']:,.0f} MiB")
    return 0 if out["by_key_day"]["p99_ms"] <= 50.0 else 1  # goal: a day's lookup <= 50 ms


if __name__ == "__main__":
    sys.exit(main())
