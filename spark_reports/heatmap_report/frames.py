"""The heatmap job as pure DataFrame -> DataFrame functions (no session, no I/O).

Histograms merge by adding counts, so a window of a cluster is: explode each
row's bucket map, sum counts per (window, broker, op, bucket), then roll the
brokers up into the cluster-wide row (`broker = "ALL"`). Percentiles follow
DESIGN's rule on the merged buckets: the upper bound of the bucket where the
cumulative count (a window function) reaches ceil(q * count), at least 1,
clamped to the window's [min, max]. Everything is Spark SQL expressions: no Python UDF runs.
"""

from __future__ import annotations

import re
from datetime import datetime

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from heatmap.layout import PER_OCTAVE, ZERO_INDEX, octave_uppers
from heatmap.sla import SLA_MAX_S
from spark_reports import schema
from spark_reports.errors import ReportError

ALL_BROKERS = "ALL"
QUANTILES = {"p50": 0.5, "p99": 0.99, "p999": 0.999}
WINDOW_CHOICES_S = (1, 5, 10, 30, 60, 300, 600)
MAX_COLUMNS = 720  # default windows: at most this many heatmap columns
KEYS = ("window_start", "broker", "op")


def parse_window(text: str) -> int:
    """'1s', '10s', '1m', '5m', '1h' or plain seconds -> seconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([smh]?)\s*", text or "")
    if not m or int(m.group(1)) == 0:
        raise ReportError(f"--window: expected a duration like 1s, 10s, 1m, 5m, got {text!r}")
    seconds = int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]
    if seconds > 86400:
        raise ReportError(f"--window: at most 1 day, got {text!r}")
    return seconds


def choose_window_s(range_s: float) -> int:
    """The finest standard window that keeps a heatmap within MAX_COLUMNS columns."""
    for w in WINDOW_CHOICES_S:
        if range_s / w <= MAX_COLUMNS:
            return w
    return WINDOW_CHOICES_S[-1]


def bucket_upper(bucket: Column) -> Column:
    """Upper bound in seconds of schema-3 bucket ``bucket`` (heatmap.bucket_upper).

    heatmap's octave of bounds scaled by a power of two: the very floats, and
    an 8-entry array (the whole 289-row table as a literal cost the optimizer
    ~0.6 s a job, measured).
    """
    octave = F.array(*[F.lit(float(v)) for v in octave_uppers()])
    n = F.lit(PER_OCTAVE)
    return F.element_at(octave, F.pmod(bucket, n) + 1) * F.pow(F.lit(2.0), F.floor(bucket / n))


def bucket_lower(bucket: Column) -> Column:
    """Lower bound in seconds, 0 for the zero bucket (heatmap.bucket_lower)."""
    return F.when(bucket <= ZERO_INDEX, F.lit(0.0)).otherwise(bucket_upper(bucket - 1))


def window_start(window_s: int) -> Column:
    """Start of the UTC-aligned window holding ts (sub-second ts fall in their second)."""
    secs = F.unix_seconds(F.col("ts"))
    return F.timestamp_seconds(secs - F.pmod(secs, F.lit(window_s)))


def select_rows(
    df: DataFrame,
    start: datetime | None = None,
    end: datetime | None = None,
    cluster: str | None = None,
    brokers: list[str] | None = None,
    ops: list[str] | None = None,
) -> DataFrame:
    """Rows in [start, end) of the given cluster, brokers and ops (None: all).

    The date= partition is filtered too, so Spark reads only the days asked for.
    """
    cond = F.lit(True)
    has_date = schema.PARTITION_COLUMN in df.columns
    if start is not None:
        cond &= F.col("ts") >= F.lit(start)
        if has_date:
            cond &= F.col(schema.PARTITION_COLUMN) >= F.lit(start.date())
    if end is not None:
        cond &= F.col("ts") < F.lit(end)
        if has_date:
            cond &= F.col(schema.PARTITION_COLUMN) <= F.lit(end.date())
    if cluster:
        cond &= F.col("cluster") == cluster
    if brokers:
        cond &= F.col("broker").isin(*brokers)
    if ops:
        cond &= F.col("op").isin(*ops)
    return df.filter(cond)


def with_quarantine_reason(df: DataFrame) -> DataFrame:
    return schema.with_quarantine_reason(df)


def good_rows(df: DataFrame) -> DataFrame:
    """Rows that break no rule (of a frame with or without a reason column)."""
    if "reason" in df.columns:
        return df.filter(F.col("reason").isNull()).drop("reason")
    return df.filter(schema.spark_row_is_good(schema.PARTITION_COLUMN in df.columns))


def bad_rows(checked: DataFrame) -> DataFrame:
    """Rows of a with_quarantine_reason frame that break a rule, with the reason."""
    return checked.filter(F.col("reason").isNotNull())


def window_aggregate(good: DataFrame, window_s: int) -> DataFrame:
    """One pass over the rows: merged bucket counts and window stats together.

    Rows of (window_start, broker, op, bucket, count, s_count, s_sum_us,
    s_min_us, s_max_us) per broker. Each input row's stats ride on its first
    exploded entry (pos 0, or the null entry of an empty map), so summing the
    s_* columns over a window's buckets counts every row once; `buckets_of`
    and `stats_of` split this frame, after `with_cluster_rows` adds "ALL".
    The job writes it once and reads it twice instead of scanning the log twice.
    """
    entries = good.select(
        window_start(window_s).alias("window_start"),
        "broker",
        "op",
        "count",
        "sum_us",
        "min_us",
        "max_us",
        F.posexplode_outer("buckets").alias("pos", "bucket", "n"),
    )
    first = F.col("pos").isNull() | (F.col("pos") == 0)
    nonempty = first & (F.col("count") > 0)
    return entries.groupBy(*KEYS, "bucket").agg(
        F.sum("n").alias("count"),
        F.sum(F.when(first, F.col("count"))).alias("s_count"),
        F.sum(F.when(first, F.col("sum_us"))).alias("s_sum_us"),
        F.min(F.when(nonempty, F.col("min_us"))).alias("s_min_us"),
        F.max(F.when(nonempty, F.col("max_us"))).alias("s_max_us"),
    )


def window_entries(checked: DataFrame, window_s: int) -> DataFrame:
    """The job's one pass over rows carrying a quarantine ``reason``, for the driver
    (spark_reports.heatmap_report.merge) to finish.

    Rows of (window_start, broker, op, reason, bucket, count, s_count, s_sum_us,
    s_min_us, s_max_us, rows, first, last): good rows' buckets merged per
    window, broker and op, their stats riding on each row's first entry as in
    `window_aggregate`; a quarantined row is one entry (bucket null) under its
    reason. ``rows`` counts input rows, ``first``/``last`` are their earliest and
    latest ts (epoch s), so the overview needs no pass of its own. Nothing
    filters on ``reason``: Spark would push such a filter below the projection
    that computes it and run the rules again inside the filter.
    """
    good = F.col("reason").isNull()
    entries = checked.select(
        window_start(window_s).alias("window_start"), "broker", "op", "reason", "count",
        "sum_us", "min_us", "max_us", F.unix_seconds("ts").alias("t"),
        F.posexplode_outer(F.when(good, F.col("buckets"))).alias("pos", "bucket", "n"),
    )  # fmt: skip
    first = F.col("pos").isNull() | (F.col("pos") == 0)
    stats = first & good
    nonempty = stats & (F.col("count") > 0)
    return entries.groupBy(*KEYS, "reason", "bucket").agg(
        F.sum("n").alias("count"),
        F.sum(F.when(stats, F.col("count"))).alias("s_count"),
        F.sum(F.when(stats, F.col("sum_us"))).alias("s_sum_us"),
        F.min(F.when(nonempty, F.col("min_us"))).alias("s_min_us"),
        F.max(F.when(nonempty, F.col("max_us"))).alias("s_max_us"),
        F.count(F.when(first, F.lit(1))).alias("rows"),
        F.min(F.when(first, F.col("t"))).alias("first"),
        F.max(F.when(first, F.col("t"))).alias("last"),
    )


def with_cluster_rows(agg: DataFrame) -> DataFrame:
    """Add broker = "ALL" rows to a window_aggregate frame.

    Rolled up from the per-broker aggregate, which is already merged per
    window, rather than by grouping sets over the exploded rows (twice the rows).
    """
    cluster = agg.groupBy("window_start", "op", "bucket").agg(
        F.sum("count").alias("count"),
        F.sum("s_count").alias("s_count"),
        F.sum("s_sum_us").alias("s_sum_us"),
        F.min("s_min_us").alias("s_min_us"),
        F.max("s_max_us").alias("s_max_us"),
    )
    return agg.unionByName(cluster.withColumn("broker", F.lit(ALL_BROKERS)))


def buckets_of(agg: DataFrame) -> DataFrame:
    """window_start, broker, op, bucket, count from a window_aggregate frame."""
    return agg.filter(F.col("bucket").isNotNull()).select(*KEYS, "bucket", "count")


def stats_of(agg: DataFrame) -> DataFrame:
    """window_start, broker, op, count, sum_us, min_us, max_us from a window_aggregate frame."""
    return agg.groupBy(*KEYS).agg(
        F.sum("s_count").alias("count"),
        F.sum("s_sum_us").alias("sum_us"),
        F.min("s_min_us").alias("min_us"),
        F.max("s_max_us").alias("max_us"),
    )


def heatmap_buckets(good: DataFrame, window_s: int) -> DataFrame:
    """window_start, broker, op, bucket, count: merged histograms per window."""
    return buckets_of(with_cluster_rows(window_aggregate(good, window_s)))


def window_stats(good: DataFrame, window_s: int) -> DataFrame:
    """window_start, broker, op, count, sum_us, min_us, max_us per window."""
    return stats_of(with_cluster_rows(window_aggregate(good, window_s)))


def percentiles(buckets: DataFrame, stats: DataFrame, keys: tuple[str, ...] = KEYS) -> DataFrame:
    """keys..., count, mean, p50, p99, p999, max (seconds) from merged buckets.

    One shuffle by `keys`: stats joined to their buckets, a running sum over
    the buckets in order, then per group the first bucket reaching each rank.
    Groups with no calls keep null percentiles (count 0).
    """
    keys = list(keys)
    joined = stats.join(
        buckets.filter(F.col("count") > 0).select(*keys, "bucket", F.col("count").alias("n")),
        keys,
        "left",
    )
    running = Window.partitionBy(*keys).orderBy("bucket").rowsBetween(Window.unboundedPreceding, 0)
    cum = joined.withColumn("cum", F.sum("n").over(running))
    reached = [
        F.min(
            F.when(
                F.col("cum") >= F.greatest(F.ceil(F.lit(q) * F.col("count")), F.lit(1)),
                F.col("bucket"),
            )
        ).alias(f"b_{name}")
        for name, q in QUANTILES.items()
    ]
    carried = [F.first(c).alias(c) for c in ("count", "sum_us", "min_us", "max_us")]
    found = cum.groupBy(*keys).agg(*carried, *reached)
    lo, hi = F.col("min_us") / 1e6, F.col("max_us") / 1e6
    pcts = [
        F.least(F.greatest(bucket_upper(F.col(f"b_{name}")), lo), hi).alias(name)
        for name in QUANTILES
    ]
    return found.select(
        *keys,
        "count",
        F.when(F.col("count") > 0, F.col("sum_us") / F.col("count") / 1e6).alias("mean"),
        *pcts,
        F.when(F.col("count") > 0, hi).alias("max"),
    )


def whole_range(buckets: DataFrame, stats: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The same frames merged over every window: one histogram per (broker, op)."""
    b = buckets.groupBy("broker", "op", "bucket").agg(F.sum("count").alias("count"))
    s = stats.groupBy("broker", "op").agg(
        F.sum("count").alias("count"),
        F.sum("sum_us").alias("sum_us"),
        F.min("min_us").alias("min_us"),
        F.max("max_us").alias("max_us"),
    )
    return b, s


def count_over(buckets: DataFrame, threshold_s: float = SLA_MAX_S) -> DataFrame:
    """broker, op, over: calls in buckets whose lower bound is >= threshold_s.

    From histograms this is a lower bound on the exact number above the
    threshold (20 ms falls inside bucket -45, so this counts from 20.3 ms).
    """
    over = F.when(bucket_lower(F.col("bucket")) >= F.lit(threshold_s), F.col("count")).otherwise(0)
    return buckets.groupBy("broker", "op").agg(F.sum(over).alias("over"))


def broker_ranking(buckets: DataFrame, stats: DataFrame) -> DataFrame:
    """Per (broker, op) over the whole range: count, mean, p50..p999, max, over_20ms."""
    b, s = whole_range(buckets, stats)
    pct = percentiles(b, s, keys=("broker", "op"))
    over = count_over(b).withColumnRenamed("over", "over_20ms")
    return pct.join(over, ["broker", "op"], "left").fillna(0, subset=["over_20ms"])


def spikes(pcts: DataFrame, threshold_s: float = SLA_MAX_S) -> DataFrame:
    """Per-broker windows whose max exceeds threshold_s, worst first within time."""
    return (
        pcts.filter((F.col("broker") != ALL_BROKERS) & (F.col("max") > F.lit(threshold_s)))
        .select("window_start", "broker", "op", "max", "p999", "count")
        .orderBy("window_start", F.col("max").desc())
    )
