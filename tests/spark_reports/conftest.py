"""A small metrics log with a known answer, shared by the capacity frames' and
the capacity job's tests: three brokers over 00:00 (two date= partitions), a
10-second flash peak, three 350 ms stalls on b1 and one quarantined row."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from heatmap import bucket_indices
from spark_reports.schema import BROKER_STATS_SCHEMA, LATENCY_SCHEMA

START = datetime(2026, 11, 10, 23, 58, 0, tzinfo=UTC)  # spans two date= partitions
SECONDS = 240
BROKERS = ("b0", "b1", "b2")


def _latency_rows(rng: np.random.Generator) -> list[dict]:
    rows = []
    for s in range(SECONDS):
        ts = START + timedelta(seconds=s)
        flash = 8.0 if 120 <= s < 130 else 1.0  # 00:00 flash peak
        for i, broker in enumerate(BROKERS):
            for op in ("send", "pull"):
                msgs = int(rng.integers(500, 1500) * flash * (1 + i))
                count = msgs if op == "send" else max(1, msgs // 32)
                lat = rng.lognormal(np.log(0.0008), 0.5, size=5)
                if broker == "b1" and op == "send" and s in (30, 31, 200):
                    lat[0] = 0.35  # a PageCache stall
                idx = bucket_indices(lat)
                per = np.full(5, count // 5)
                per[0] += count - per.sum()
                buckets = {}
                for k, c in zip(idx.tolist(), per.tolist(), strict=True):
                    buckets[k] = buckets.get(k, 0) + c
                rows.append({
                    "ts": ts, "cluster": "trade", "broker": broker, "op": op, "count": count,
                    "sum_us": int((lat * per).sum() * 1e6), "min_us": int(lat.min() * 1e6),
                    "max_us": int(lat.max() * 1e6), "buckets": list(buckets.items()),
                    "msgs": msgs, "bytes": msgs * 1000,
                })  # fmt: skip
    return rows


def _write(root, table: str, schema: pa.Schema, rows: list[dict]) -> None:
    by_day: dict[date, list[dict]] = {}
    for r in rows:
        by_day.setdefault(r["ts"].date(), []).append(r)
    for day, part in by_day.items():
        d = root / table / f"date={day.isoformat()}"
        d.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(part, schema=schema), d / "part-00000.parquet")


@pytest.fixture(scope="module")
def metrics_log(tmp_path_factory):
    root = tmp_path_factory.mktemp("log")
    rng = np.random.default_rng(11)
    rows = _latency_rows(rng)
    bad = dict(rows[0], count=rows[0]["count"] + 1)  # count != sum(buckets): quarantined
    _write(root, "latency", LATENCY_SCHEMA, rows + [bad])
    stats = [
        {"ts": START + timedelta(seconds=s), "cluster": "trade", "broker": b,
         "disk_used_bytes": 10**11 * (i + 1) + s * 10**6 * (i + 1), "disk_total_bytes": 10**12,
         "msgs_in_per_s": 1.0, "msgs_out_per_s": 15.0, "commit_offset": s, "consumer_lag": 0}
        for s in range(0, SECONDS, 10) for i, b in enumerate(BROKERS)
    ]  # fmt: skip
    _write(root, "broker_stats", BROKER_STATS_SCHEMA, stats)
    frame = pd.DataFrame(rows)
    return root, frame
