"""The metrics-log contract (docs/architecture.md, "Metrics log"): table layout, the
pyarrow schemas, a histogram <-> row encoding, and the quarantine rules.

The broker writes its per-second log with these schemas and rows, the
synthetic generator writes the same, and spark_reports reads them (its Spark
form of the schema and rules lives in ``spark_reports.schema``). Needs pyarrow,
so ``import heatmap`` does not load it: import this module by name.

A log is a directory of tables, each partitioned by ``date=YYYY-MM-DD`` (the
UTC date of ``ts``)::

    LOG/latency/date=2026-11-11/part-00000.parquet      one row per second, broker, op
    LOG/latency_1m/date=2026-11-11/part-00000.parquet   the same, merged per minute
    LOG/broker_stats/date=2026-11-11/part-00000.parquet

``latency_1m`` is a rollup of ``latency`` in the same schema (``ts`` the
minute's first second): histograms merge exactly, so a minute row is the sum
of its seconds' rows (count, sum, msgs, bytes and bucket counts added; min and
max over the seconds that timed a call). Long ranges are read from it, as
Prometheus answers them from downsampled blocks; :mod:`heatmap.rollup` makes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from heatmap.errors import HeatmapError
from heatmap.histogram import LatencyHistogram
from heatmap.layout import MAX_INDEX, SCHEMA, ZERO_INDEX

LATENCY_TABLE = "latency"
LATENCY_1M_TABLE = "latency_1m"  # the per-minute rollup of LATENCY_TABLE, same schema
BROKER_STATS_TABLE = "broker_stats"
ROLLUP_S = 60  # seconds merged into one LATENCY_1M_TABLE row
PARTITION_COLUMN = "date"

# Operations a broker times. A row with any other op is quarantined, so a typo
# in a writer shows up as a count in the report instead of a phantom op.
KNOWN_OPS = ("send", "pull", "flush", "replicate", "commit", "ack")
# The ones floodgate's broker times and exports (/stats, /metrics, the Prometheus rules)
BROKER_OPS = ("send", "pull", "flush")

# Timestamps are whole UTC seconds; stored at microsecond precision, the unit
# pyarrow, Spark and DuckDB all read as "timestamp with time zone".
TS_TYPE = pa.timestamp("us", tz="UTC")

LATENCY_SCHEMA = pa.schema(
    [
        pa.field("ts", TS_TYPE),
        pa.field("cluster", pa.string()),
        pa.field("broker", pa.string()),
        pa.field("op", pa.string()),
        pa.field("count", pa.int64()),  # operations timed in this second
        pa.field("sum_us", pa.int64()),  # their latency sum, microseconds
        pa.field("min_us", pa.int64()),
        pa.field("max_us", pa.int64()),
        pa.field("buckets", pa.map_(pa.int32(), pa.int64())),  # schema-3 index -> count
        pa.field("msgs", pa.int64()),  # messages carried (a pull returns many)
        pa.field("bytes", pa.int64()),
    ]
)

BROKER_STATS_SCHEMA = pa.schema(
    [
        pa.field("ts", TS_TYPE),
        pa.field("cluster", pa.string()),
        pa.field("broker", pa.string()),
        pa.field("disk_used_bytes", pa.int64()),
        pa.field("disk_total_bytes", pa.int64()),
        pa.field("msgs_in_per_s", pa.float64()),
        pa.field("msgs_out_per_s", pa.float64()),
        pa.field("commit_offset", pa.int64()),  # CommitLog max physical offset
        pa.field("consumer_lag", pa.int64()),  # messages behind, all groups
    ]
)

SCHEMAS = {
    LATENCY_TABLE: LATENCY_SCHEMA,
    LATENCY_1M_TABLE: LATENCY_SCHEMA,
    BROKER_STATS_TABLE: BROKER_STATS_SCHEMA,
}

# Quarantine reasons, in the order they are checked (a row gets the first).
NULL_FIELD = "null field"
NEGATIVE = "negative count"
COUNT_MISMATCH = "count != sum(buckets)"
UNKNOWN_OP = "unknown op"
TIME_OUT_OF_RANGE = "ts out of range"
BAD_BUCKET = "bucket index out of range"
MIN_OVER_MAX = "min_us > max_us"
REASONS = (
    NULL_FIELD,
    NEGATIVE,
    COUNT_MISMATCH,
    UNKNOWN_OP,
    TIME_OUT_OF_RANGE,
    BAD_BUCKET,
    MIN_OVER_MAX,
)

# Sane wall-clock range for any metrics log; tighter: ts must match its date= partition.
EARLIEST_TS = datetime(2000, 1, 1, tzinfo=UTC)
LATEST_TS = datetime(2100, 1, 1, tzinfo=UTC)

KEY_COLUMNS = ("ts", "cluster", "broker", "op", "count", "sum_us", "min_us", "max_us", "buckets")
NON_NEGATIVE = ("count", "sum_us", "min_us", "max_us", "msgs", "bytes")


def partition_dir(table: str, day: date) -> str:
    """Relative directory of one day of ``table``: ``latency/date=2026-11-11``."""
    return f"{table}/{PARTITION_COLUMN}={day.isoformat()}"


# --- rows -----------------------------------------------------------------


def _us(seconds: float | None) -> int:
    return 0 if seconds is None else round(seconds * 1e6)


def _utc(ts: int | float | datetime) -> datetime:
    if isinstance(ts, datetime):
        return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)
    return datetime.fromtimestamp(ts, tz=UTC)


def latency_row(
    ts: int | float | datetime,
    cluster: str,
    broker: str,
    op: str,
    hist: LatencyHistogram,
    msgs: int,
    nbytes: int,
) -> dict[str, Any]:
    """One ``latency`` row: a second's histogram of ``op`` on ``broker``.

    ``ts`` is epoch seconds (or an aware datetime); latencies are stored as
    whole microseconds (sum, min, max; 0 for an empty histogram) and the
    schema-3 buckets as (index, count) pairs in index order.
    """
    if hist.schema != SCHEMA:
        raise HeatmapError(f"the metrics log stores schema-{SCHEMA} histograms, got {hist.schema}")
    return {
        "ts": _utc(ts),
        "cluster": cluster,
        "broker": broker,
        "op": op,
        "count": hist.count,
        "sum_us": _us(hist.sum),
        "min_us": _us(hist.min),
        "max_us": _us(hist.max),
        "buckets": list(hist.buckets.items()),
        "msgs": msgs,
        "bytes": nbytes,
    }


def histogram_from_row(row: Mapping[str, Any]) -> LatencyHistogram:
    """The histogram a ``latency`` row (or a merge of rows, same fields) holds.

    ``buckets`` may be (index, count) pairs, as pyarrow returns a map, or a
    mapping. Sum, min and max come back at the log's microsecond precision.
    """
    raw = row.get("buckets") or {}
    buckets = dict(raw) if not isinstance(raw, Mapping) else raw
    return LatencyHistogram.from_dict(
        {
            "count": int(row.get("count") or 0),
            "sum": (row.get("sum_us") or 0) / 1e6,
            "min": (row.get("min_us") or 0) / 1e6,
            "max": (row.get("max_us") or 0) / 1e6,
            "buckets": buckets,
        }
    )


def broker_stats_row(
    ts: int | float | datetime,
    cluster: str,
    broker: str,
    disk_used: int,
    disk_total: int,
    msgs_in: float,
    msgs_out: float,
    commit_offset: int,
    consumer_lag: int,
) -> dict[str, Any]:
    """One ``broker_stats`` row: a broker's gauges at second ``ts``."""
    return {
        "ts": _utc(ts),
        "cluster": cluster,
        "broker": broker,
        "disk_used_bytes": disk_used,
        "disk_total_bytes": disk_total,
        "msgs_in_per_s": msgs_in,
        "msgs_out_per_s": msgs_out,
        "commit_offset": commit_offset,
        "consumer_lag": consumer_lag,
    }


# --- quarantine rules, numpy form -------------------------------------------


def quarantine_reasons(table: pa.Table, partition_day: date | None = None) -> np.ndarray:
    """Reason per row of a latency table (object array, None for a good row).

    The rules are declared once here (REASONS in order, KEY_COLUMNS, NON_NEGATIVE,
    KNOWN_OPS, the time and bucket bounds); this is their numpy engine, for writers
    that refuse bad rows. ``spark_reports.schema.spark_rules`` is their Spark SQL
    engine (it must run in the JVM, so it cannot call this), and
    tests/spark_reports/test_schema.py holds the two to the same reason on every rule.
    """
    n = table.num_rows
    reasons = np.full(n, None, dtype=object)

    def mark(mask: np.ndarray, reason: str) -> None:
        reasons[(reasons == None) & mask] = reason  # noqa: E711 - elementwise on objects

    null = np.zeros(n, dtype=bool)
    for name in KEY_COLUMNS:
        null |= table.column(name).is_null().to_numpy(zero_copy_only=False)
    mark(null, NULL_FIELD)

    buckets = table.column("buckets").combine_chunks()
    offsets = buckets.offsets.to_numpy()  # absolute into .values, even when sliced
    lengths = np.diff(offsets)
    row_of_entry = np.repeat(np.arange(n), lengths)
    entries = slice(offsets[0], offsets[-1])
    keys = buckets.values.field(0).to_numpy(zero_copy_only=False)[entries]
    items = buckets.values.field(1)
    null_item = items.is_null().to_numpy(zero_copy_only=False)[entries]
    values = pc.fill_null(items, 0).to_numpy(zero_copy_only=False)[entries]

    null_entry_rows = np.zeros(n, dtype=bool)
    null_entry_rows[row_of_entry[null_item]] = True
    mark(null_entry_rows, NULL_FIELD)

    def col(name: str) -> np.ndarray:
        return pc.fill_null(table.column(name), 0).to_numpy(zero_copy_only=False)

    negative = np.zeros(n, dtype=bool)
    for name in NON_NEGATIVE:
        negative |= col(name) < 0
    negative[row_of_entry[values < 0]] = True
    mark(negative, NEGATIVE)

    exact_sum = np.zeros(n, dtype=np.int64)
    np.add.at(exact_sum, row_of_entry, values.astype(np.int64))
    mark(exact_sum != col("count"), COUNT_MISMATCH)

    ops = pc.fill_null(table.column("op"), "").to_numpy(zero_copy_only=False)
    mark(~np.isin(ops, np.array(KNOWN_OPS, dtype=object)), UNKNOWN_OP)

    ts_us = pc.fill_null(table.column("ts").cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    lo, hi = _epoch_us(EARLIEST_TS), _epoch_us(LATEST_TS)
    if partition_day is not None:
        day0 = _epoch_us(
            datetime(partition_day.year, partition_day.month, partition_day.day, tzinfo=UTC)
        )
        lo, hi = day0, day0 + 86_400_000_000
    mark((ts_us < lo) | (ts_us >= hi), TIME_OUT_OF_RANGE)

    # A row may use the zero bucket up to MAX_INDEX (2**16 s): beyond is a corrupt writer.
    bad_key = (keys < ZERO_INDEX) | (keys > MAX_INDEX)
    bad_bucket = np.zeros(n, dtype=bool)
    bad_bucket[row_of_entry[bad_key]] = True
    mark(bad_bucket, BAD_BUCKET)

    mark((col("count") > 0) & (col("min_us") > col("max_us")), MIN_OVER_MAX)
    return reasons


def _epoch_us(t: datetime) -> int:
    return int(t.timestamp()) * 1_000_000
