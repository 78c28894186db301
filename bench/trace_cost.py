"""What tracing every message costs a producer's send throughput: tracing off against
tracing on, alternated rounds on the same two-broker cluster in the same run.

Each round runs the load generator (`floodgate bench produce`'s, asyncio, 64 in
flight, as fast as it goes) for `--seconds` with keyed 128-byte messages, once with
`Producer(trace_rate=0)` and once with `trace_rate=1` (every send sampled: the
TRACE property, a `send` record per message batched to %TRACE% from the load's event
loop, the brokers' `stored` summaries and the index entries of both). Keys are set in both, so the
difference is tracing alone. Each round runs both back to back (in turns which first);
the figure is the median of the rounds' on/off ratios; goal: on >= 0.85 x off.

    .venv/bin/python bench/trace_cost.py [--rounds 8] [--seconds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _util import peak_rss_mib  # noqa: E402

from broker_core.client.loadgen import LoadGenerator, LoadSpec  # noqa: E402
from broker_core.client.producer import Producer  # noqa: E402
from broker_core.cluster.launcher import Cluster  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402


def vm_hwm_mib(pid: int) -> float:
    """Peak RSS of another process (VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def one_round(addrs, rate: float, seconds: float, tag: str) -> dict:
    producer = Producer(addrs, timeout=3.0, trace_rate=rate)
    try:
        gen = LoadGenerator(producer, LoadSpec(topic="bench", size=128, duration=seconds,
                                               concurrency=64, key_prefix=f"{tag}-"))
        result = gen.run().to_dict()
    finally:
        producer.close()  # the trace dispatcher sends what it holds
    out = {"tps": result["tps"], "p99_ms": result["p99_s"] * 1000, "errors": result["errors"]}
    if producer.tracer is not None:
        out["trace"] = dict(producer.tracer.dispatcher.counters)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    data = Path(tempfile.mkdtemp(prefix="floodgate-tracecost-"))
    cluster = Cluster(2, free_port_range(4), data, flush="async", segment_size="256M")
    cluster.up()
    runs: dict[str, list[dict]] = {"off": [], "on": []}
    try:
        addrs = cluster.file.addrs
        one_round(addrs, 0.0, 2.0, "warm")  # topic files, connections, page cache
        for i in range(args.rounds):
            order = ("off", "on") if i % 2 == 0 else ("on", "off")
            for mode in order:
                r = one_round(addrs, 1.0 if mode == "on" else 0.0, args.seconds, f"r{i}{mode}")
                runs[mode].append(r)
                print(f"  round {i + 1} tracing {mode:3s}: {r['tps']:8,.0f} msgs/s  "
                      f"p99 {r['p99_ms']:.2f} ms", file=sys.stderr)
        time.sleep(1.5)  # the brokers' last store records (written each second)
        broker_rss = {name: vm_hwm_mib(proc.pid) for name, proc in cluster.procs.items()}
    finally:
        cluster.down()
    off = statistics.median(r["tps"] for r in runs["off"])
    on = statistics.median(r["tps"] for r in runs["on"])
    # each round's pair ran back to back: its ratio cancels the host's drift (this shared
    # machine's speed wanders by a third over minutes), which medians of each mode do not
    pairs = [b["tps"] / a["tps"] for a, b in zip(runs["off"], runs["on"], strict=True)]
    ratio = statistics.median(pairs)
    out = {"rounds": args.rounds, "seconds": args.seconds, "off_tps": off, "on_tps": on,
           "pair_ratios": pairs, "ratio": ratio, "cost": 1 - ratio, "goal_met": ratio >= 0.85,
           "runs": runs, "peak_rss_mib": {"client": peak_rss_mib(), **broker_rss}}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"tracing off {off:,.0f} msgs/s, on {on:,.0f} msgs/s (medians); on/off, the "
              f"median of the rounds' pairs: {ratio:.3f} (cost {1 - ratio:.1%}; goal <= 15 %)")
        print("peak RSS MiB: " + ", ".join(f"{k} {v:,.0f}" for k, v in
                                           out["peak_rss_mib"].items()))
    return 0 if out["goal_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
