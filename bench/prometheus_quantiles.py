"""How far is the p99 Grafana shows from the true one? Prometheus'
histogram_quantile over the brokers' power-of-two export, vs the broker's own
schema-3 percentile, vs the exact quantile of the same latencies (the peer).

Each shape is 200,000 latencies; the classic buckets are the ones the broker
serves on /metrics (broker_core.observe.prometheus.classic_buckets), and histogram_quantile
is re-implemented as Prometheus does it (linear inside the bucket, 0 as the
lower bound of the first one). Goal: every Prometheus estimate within one
power-of-two bucket (a factor of 2) of the exact value; the recording rules
and the dashboard rely on it. Also times building the dashboard and the
rules (what `floodgate grafana dashboard` / `prometheus config` do).

    .venv/bin/python bench/prometheus_quantiles.py [--n 200000] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _util import median_seconds, peak_rss_mib  # noqa: E402

from broker_core.observe.prometheus import classic_buckets  # noqa: E402
from heatmap import LatencyHistogram  # noqa: E402

QUANTILES = (0.5, 0.99, 0.999)


def shapes(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    healthy = rng.lognormal(math.log(0.0006), 0.5, n)
    stalls = healthy.copy()
    hit = rng.random(n) < 0.003  # 0.3 % of sends behind a 200-2000 ms PageCache stall
    stalls[hit] = rng.uniform(0.2, 2.0, hit.sum())
    return {
        "lognormal 0.6 ms": healthy,
        "lognormal + 0.3 % stalls": stalls,
        "uniform 1-3 ms": rng.uniform(0.001, 0.003, n),
        "bimodal 0.5 / 12 ms": np.where(rng.random(n) < 0.95, rng.normal(0.0005, 5e-5, n),
                                        rng.normal(0.012, 1e-3, n)).clip(1e-6),
    }


def histogram_quantile(q: float, cumulative: list[tuple[str, float]]) -> float:
    """Prometheus' classic histogram_quantile over (le, cumulative count) pairs."""
    total = cumulative[-1][1]
    rank = q * total
    prev_le, prev_count = 0.0, 0.0
    for i, (le_text, count) in enumerate(cumulative):
        le = float(le_text)
        if count >= rank:
            if math.isinf(le):  # in +Inf: the highest finite bound
                return float(cumulative[i - 1][0])
            if i == 0 and le <= 0:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / (count - prev_count)
        prev_le, prev_count = le, count
    return math.nan


def build_time() -> tuple[float, float]:
    from console.observability.grafana_dashboard import build_dashboard
    from console.observability.prometheus_config import dump_yaml
    from console.observability.prometheus_rules import rules_file

    return (median_seconds(build_dashboard, 5), median_seconds(lambda: dump_yaml(rules_file()), 5))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(11)
    rows, worst = [], 1.0
    for name, values in shapes(args.n, rng).items():
        hist = LatencyHistogram()
        hist.record_many(values)
        cumulative = classic_buckets(hist)
        for q in QUANTILES:
            exact = float(np.quantile(values, q))
            fine = hist.quantile(q)
            prom = histogram_quantile(q, cumulative)
            ratio = prom / exact
            worst = max(worst, ratio, 1 / ratio)
            rows.append({"shape": name, "q": q, "exact_s": exact, "schema3_s": fine,
                         "prometheus_s": prom, "schema3_err": fine / exact - 1,
                         "prometheus_ratio": ratio})
    dash_s, rules_s = build_time()
    rss = peak_rss_mib()
    if args.json:
        print(json.dumps({"rows": rows, "worst_factor": worst, "dashboard_build_s": dash_s,
                          "rules_build_s": rules_s, "peak_rss_mib": rss}, indent=2))
    else:
        print(f"{'shape':26} {'q':>6} {'exact':>10} {'schema-3':>10} {'err':>7} "
              f"{'Prometheus':>11} {'ratio':>6}")
        for r in rows:
            print(f"{r['shape']:26} {r['q']:>6} {r['exact_s'] * 1e3:>8.3f}ms "
                  f"{r['schema3_s'] * 1e3:>8.3f}ms {r['schema3_err']:>+7.1%} "
                  f"{r['prometheus_s'] * 1e3:>9.3f}ms {r['prometheus_ratio']:>6.2f}")
        print(f"worst Prometheus factor {worst:.2f} (goal <= 2); dashboard build "
              f"{dash_s * 1e3:.1f} ms, rules build {rules_s * 1e3:.1f} ms; "
              f"peak RSS {rss:.0f} MiB")
    return 0 if worst <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
