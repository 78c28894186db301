"""Every fuse scenario x policy in the deterministic simulator, as one table.

Goals (issue 5): in `pagecache-stall`, our share of sends over 20 ms <= 0.01 %
and <= 1/10 of the `rocketmq` policy's; in `cluster-slow`, no more failed sends
than `none`; our fuse never excludes more than 30 % of the brokers. Issue 14:
in `client-pause` (the producer itself pauses and the shared host is short of
CPU, beside a stalled broker) our fuse isolates no fault-free broker (the
`false iso` column, for every policy).

    .venv/bin/python bench/fuse_policies.py [--seconds 300] [--rate 2000] [--seed 1] [--json]

The issue's full size (600 s at 10,000 sends/s, 6 M sends per cell) takes
about 30 s per cell here; the default is smaller so the bench stays short.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _util import peak_rss_mib  # noqa: E402

from fuse.sim import simulate  # noqa: E402
from fuse.sim_policies import POLICIES  # noqa: E402
from fuse.sim_scenarios import SCENARIOS  # noqa: E402


def check_goals(rows: dict[tuple[str, str], dict], brokers: int) -> list[str]:
    missed = []
    stall = rows.get(("pagecache-stall", "fuse"))
    rocket = rows.get(("pagecache-stall", "rocketmq"))
    if stall and stall["share_over_20ms"] > 0.0001:
        missed.append(f"pagecache-stall: fuse share over 20 ms {stall['share_over_20ms']:.5%} > 0.01 %")
    if stall and rocket and stall["share_over_20ms"] > rocket["share_over_20ms"] / 10:
        missed.append("pagecache-stall: fuse share over 20 ms > 1/10 of rocketmq's")
    slow, plain = rows.get(("cluster-slow", "fuse")), rows.get(("cluster-slow", "none"))
    if slow and plain and slow["failed"] > plain["failed"]:
        missed.append(f"cluster-slow: fuse failed {slow['failed']} > none {plain['failed']}")
    pause = rows.get(("client-pause", "fuse"))
    if pause and pause["false_isolations"]:
        missed.append(f"client-pause: fuse isolated fault-free brokers "
                      f"{pause['false_isolations']} time(s)")
    for (scenario, policy), row in rows.items():
        if policy == "fuse" and row["max_excluded"] > int(0.3 * brokers + 1e-9):
            missed.append(f"{scenario}: fuse excluded {row['max_excluded']} of {brokers}")
    return missed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--brokers", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    rows: dict[tuple[str, str], dict] = {}
    header = (f"{'scenario':<16} {'policy':<10} {'over 20ms':>10} {'avg ms':>8} {'p999 ms':>9}"
              f" {'failed':>7} {'max excl':>8} {'false iso':>9} {'wall s':>7} {'RSS MiB':>8}")
    if not args.json:
        print(f"{args.brokers} brokers, {args.seconds:g} s at {args.rate:g} sends/s, seed {args.seed}")
        print(header)
    for scenario in args.scenarios.split(","):
        for policy in args.policies.split(","):
            t0 = time.perf_counter()
            result = simulate(scenario, policy, brokers=args.brokers, seconds=args.seconds,
                              rate=args.rate, seed=args.seed).to_dict()
            result["wall_s"] = time.perf_counter() - t0
            result["peak_rss_mib"] = peak_rss_mib()
            rows[(scenario, policy)] = result
            if not args.json:
                print(f"{scenario:<16} {policy:<10} {result['share_over_20ms']:>10.4%}"
                      f" {result['avg_rt_ms']:>8.2f} {result['p999_ms']:>9.1f}"
                      f" {result['failed']:>7} {result['max_excluded']:>8}"
                      f" {result['false_isolations']:>9}"
                      f" {result['wall_s']:>7.1f} {result['peak_rss_mib']:>8.0f}", flush=True)
    missed = check_goals(rows, args.brokers)
    if args.json:
        json.dump({"rows": list(rows.values()), "goals_missed": missed}, sys.stdout, indent=2)
        print()
    else:
        print("goals: " + ("all met" if not missed else "; ".join(missed)))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
