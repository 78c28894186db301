"""What exactly once costs a consume-transform-produce job (issue 61).

One broker (async flush), a topic of `--count` (20,000) messages on 4 queues, read and
written again to another topic by the same job two ways, alternating three times,
each round with a fresh consumer group:

- at least once: a Consumer polls 64, an idempotent Producer sends each output
  (send_async, all 64 in flight), the offsets ride the next pull (commit(wait=False));
- exactly once: client.transform.Transform, a transaction a queue's batch (64 halves
  in flight, then one END_TRANSACTION carrying the offsets).

Goal: exactly once at >= 50 % of at least once's rate. Peak RSS of this process and
of the broker beside the figures.

    .venv/bin/python bench/transform_cost.py [--count 20000] [--json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import wait
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import cluster_peak_rss_mib, peak_rss_mib, print_figures  # noqa: E402

from broker_core.client.consumer import Consumer  # noqa: E402
from broker_core.client.producer import Producer  # noqa: E402
from broker_core.client.transform import Transform  # noqa: E402
from broker_core.cluster.launcher import Cluster  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402

BATCH = 64


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def fill(addrs, count: int) -> None:
    with Producer(addrs) as p:
        for start in range(0, count, 512):
            wait([p.send_async("in", b"m%07d" % i, keys=f"k{i % 64}")
                  for i in range(start, min(count, start + 512))])


def at_least_once(addrs, group: str, count: int) -> float:
    with Consumer(group, "in", addrs, retry=False) as c, Producer(addrs) as p:
        t0, done = time.perf_counter(), 0
        while done < count:
            msgs = c.poll(BATCH, 1.0)
            wait([p.send_async("out-alo", m.body.upper(), keys=m.keys) for m in msgs])
            c.commit(wait=False)
            done += len(msgs)
        return count / (time.perf_counter() - t0)


def exactly_once(addrs, group: str, count: int) -> float:
    with Transform(group, "in", "out-eo", lambda m: m.body.upper(), addrs,
                   max_batch=BATCH) as t:
        t0 = time.perf_counter()
        while t.counters.consumed < count:
            t.step(1.0)
        rate = count / (time.perf_counter() - t0)
        assert t.counters.produced == count, t.counters
        return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="transform-") as tmp:
        cluster = Cluster(1, free_port_range(2), Path(tmp) / "c", flush="async",
                          segment_size="64M", extra_args=["--queues", "4"])
        cluster.up()
        try:
            addrs = cluster.file.addrs
            fill(addrs, args.count)
            rates: dict[str, list[float]] = {"alo": [], "eo": []}
            for r in range(3):
                rates["alo"].append(at_least_once(addrs, f"alo-{r}", args.count))
                rates["eo"].append(exactly_once(addrs, f"eo-{r}", args.count))
                say(f"  round {r + 1}: at least once {rates['alo'][-1]:,.0f}/s, "
                    f"exactly once {rates['eo'][-1]:,.0f}/s")
            broker_rss = cluster_peak_rss_mib(cluster)
        finally:
            cluster.down(grace=5.0)
    alo, eo = statistics.median(rates["alo"]), statistics.median(rates["eo"])
    out = {"count": args.count, "batch": BATCH,
           "at_least_once_msgs_s": round(alo), "exactly_once_msgs_s": round(eo),
           "ratio": round(eo / alo, 2), "goal": ">= 0.5",
           "bench_peak_rss_mib": round(peak_rss_mib(), 1), "broker_peak_rss_mib": broker_rss}
    print_figures(out, args.json, 24)


if __name__ == "__main__":
    main()
