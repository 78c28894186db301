"""ns of fuse bookkeeping per call, against pybreaker's per-call overhead.

Each variant wraps the same no-op "send" (so only the breaker's cost is
measured) over 10 brokers: ours is `choose()` + `report()` (and `choose()` +
`begin()` + `end()`, which adds in-flight judgement); pybreaker is one
`CircuitBreaker` per broker, a round-robin pick and `breaker.call(send)`.
Median of 7 interleaved rounds in one process. Goal (issue 5): choose+report
<= half of pybreaker's per call (choose+begin+end, which adds in-flight judgement,
is shown beside it).

    .venv/bin/python bench/fuse_overhead.py [--n 200000] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _util import peak_rss_mib  # noqa: E402

from fuse import Fuse  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000, help="calls per timed run")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds (median taken)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    n = args.n

    import pybreaker

    brokers = [f"broker-{i}" for i in range(10)]

    def send() -> None:
        return None

    def bare() -> None:  # the loop and the no-op call alone, subtracted below
        rr = itertools.count()
        for _ in range(n):
            brokers[next(rr) % 10]
            send()

    fuse = Fuse(brokers)

    def ours_report() -> None:
        choose, report, clock = fuse.choose, fuse.report, fuse._clock
        for _ in range(n):
            b = choose()
            t0 = clock()
            send()
            report(b, clock() - t0, True)

    def ours_inflight() -> None:
        choose, begin, end = fuse.choose, fuse.begin, fuse.end
        for _ in range(n):
            token = begin(choose())
            send()
            end(token, True)

    breakers = [pybreaker.CircuitBreaker(fail_max=5, reset_timeout=60) for _ in brokers]

    def theirs() -> None:
        rr = itertools.count()
        for _ in range(n):
            breakers[next(rr) % 10].call(send)

    # Interleaved rounds: the machine is shared, so a noisy second hits every
    # variant alike instead of whichever happened to run then.
    variants = {"bare": bare, "fuse choose+report": ours_report,
                "fuse choose+begin+end": ours_inflight, "pybreaker call": theirs}
    runs: dict[str, list[float]] = {name: [] for name in variants}
    for fn in variants.values():
        fn()  # warm-up
    for _ in range(args.rounds):
        for name, fn in variants.items():
            t0 = time.perf_counter()
            fn()
            runs[name].append(time.perf_counter() - t0)
    base = statistics.median(runs.pop("bare"))
    timings = {name: statistics.median(times) for name, times in runs.items()}
    ns = {name: max(0.0, (t - base)) / n * 1e9 for name, t in timings.items()}
    ratio_report = ns["fuse choose+report"] / ns["pybreaker call"]
    ratio_inflight = ns["fuse choose+begin+end"] / ns["pybreaker call"]
    rss = peak_rss_mib()
    goal_met = ratio_report <= 0.5  # the goal; begin+end adds in-flight judgement
    if args.json:
        json.dump({"ns_per_call": ns, "ratio_report": ratio_report,
                   "ratio_inflight": ratio_inflight, "peak_rss_mib": rss, "n": n,
                   "python": platform.python_version(), "goal_met": goal_met}, sys.stdout, indent=2)
        print()
    else:
        print(f"{n} calls per run, median of {args.rounds} interleaved rounds, loop cost {base / n * 1e9:.0f} ns subtracted"
              f" (python {platform.python_version()})")
        for name, value in ns.items():
            print(f"  {name:<24} {value:7.0f} ns/call   peak RSS {rss:.0f} MiB")
        print(f"  ours / pybreaker: choose+report {ratio_report:.2f}, "
              f"choose+begin+end {ratio_inflight:.2f}"
              " (goal: choose+report <= 0.50)")
        print("goal: " + ("met" if goal_met else "MISSED"))
    return 0 if goal_met else 1


if __name__ == "__main__":
    sys.exit(main())
