"""ns per recorded value: LatencyHistogram vs prometheus_client and HdrHistogram.

All three record the same lognormal latencies (seconds; HdrHistogram takes
integer microseconds, its usual unit) in one run; figures are the median of 5.
Goals (issue 2): record >= 4x faster than Histogram.observe; record_many
>= 50 M values/s.

    .venv/bin/python bench/histogram_record.py [--n 200000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _util import median_seconds, peak_rss_mib  # noqa: E402

from heatmap import LatencyHistogram  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000, help="values per timed run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from hdrh.histogram import HdrHistogram
    from prometheus_client import CollectorRegistry, Histogram

    rng = np.random.default_rng(42)
    values = rng.lognormal(-7.0, 1.0, args.n)
    as_list = values.tolist()
    as_us = [max(1, int(v * 1e6)) for v in as_list]

    def ours():
        h = LatencyHistogram()
        rec = h.record
        for v in as_list:
            rec(v)
        return h.count  # fold the buffer: the amortized bucketing cost is included

    buckets = [2.0**k for k in range(-20, 7)]

    def prom():
        h = Histogram("bench_seconds", "bench", buckets=buckets, registry=CollectorRegistry())
        obs = h.observe
        for v in as_list:
            obs(v)

    def hdr():
        h = HdrHistogram(1, 60_000_000, 2)
        rec = h.record_value
        for v in as_us:
            rec(v)

    big = rng.lognormal(-7.0, 1.0, 5_000_000)

    def ours_many():
        LatencyHistogram().record_many(big)

    n = args.n
    results = {
        "record_ns": median_seconds(ours) / n * 1e9,
        "prometheus_observe_ns": median_seconds(prom) / n * 1e9,
        "hdrh_record_value_ns": median_seconds(hdr) / n * 1e9,
        "record_many_values_per_s": len(big) / median_seconds(ours_many),
    }
    results["speedup_vs_prometheus"] = results["prometheus_observe_ns"] / results["record_ns"]
    results["speedup_vs_hdrh"] = results["hdrh_record_value_ns"] / results["record_ns"]
    results["peak_rss_mib"] = peak_rss_mib()
    results["python"] = platform.python_version()
    results["cpus"] = os.cpu_count()
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"LatencyHistogram.record      {results['record_ns']:8.0f} ns/value")
        print(f"prometheus Histogram.observe {results['prometheus_observe_ns']:8.0f} ns/value"
              f"  (ours {results['speedup_vs_prometheus']:.1f}x faster; goal >= 4x)")
        print(f"hdrh record_value            {results['hdrh_record_value_ns']:8.0f} ns/value"
              f"  (ours {results['speedup_vs_hdrh']:.1f}x faster)")
        print(f"LatencyHistogram.record_many {results['record_many_values_per_s'] / 1e6:8.1f} M values/s"
              "  (goal >= 50 M/s)")
        print(f"peak RSS                     {results['peak_rss_mib']:8.0f} MiB")
    ok = results["speedup_vs_prometheus"] >= 4 and results["record_many_values_per_s"] >= 50e6
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
