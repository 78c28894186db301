"""The heatmap job's Spark side as pure DataFrame -> DataFrame functions (no session, no I/O).

Histograms merge by adding counts, so a window of a broker is the sum of its rows'
bucket maps, in one pass with the quarantine rules (`window_entries`). The rules
are Spark SQL expressions; the merge runs in Spark's Python workers on Arrow
batches (heatmap_report.window_reduce says why). That aggregate is small; the
driver finishes it (heatmap_report.merge: the cluster-wide row, percentiles).
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from heatmap.sla import SLA_MAX_S
from spark_reports import schema
from spark_reports.heatmap_report.merge import ALL_BROKERS
from spark_reports.heatmap_report.windows import choose_window_s, parse_window  # noqa: F401

KEYS = ("window_start", "broker", "op")


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


def window_entries(checked: DataFrame, window_s: int) -> DataFrame:
    """The job's one pass over rows carrying a quarantine ``reason``, for the driver
    (spark_reports.heatmap_report.merge) to finish.

    Rows of heatmap_report.window_reduce.OUTPUT_SCHEMA: per window, broker, op and
    reason, the rows' stats (``s_count``, ``s_sum_us``, ``s_min_us``, ``s_max_us``;
    null for quarantined rows), how many rows (``rows``) with their earliest and
    latest ts (``first``/``last``, epoch s), and the good rows' histograms merged
    (``buckets``, ``counts``: two lists). A group may come in more than one row (it
    spanned two chunks of a worker's input): counts add up. Nothing filters on
    ``reason``: Spark would push such a filter below the projection that computes it
    and run the rules again inside the filter.
    """
    from functools import partial

    from spark_reports.heatmap_report import window_reduce

    window_reduce.ship()
    rows = checked.select(*window_reduce.INPUT_COLUMNS)
    return rows.mapInArrow(partial(window_reduce.reduce_rows, window_s=window_s),
                           window_reduce.OUTPUT_SCHEMA)  # fmt: skip


def spikes(pcts: DataFrame, threshold_s: float = SLA_MAX_S) -> DataFrame:
    """Per-broker windows whose max exceeds threshold_s, worst first within time."""
    return (
        pcts.filter((F.col("broker") != ALL_BROKERS) & (F.col("max") > F.lit(threshold_s)))
        .select("window_start", "broker", "op", "max", "p999", "count")
        .orderBy("window_start", F.col("max").desc())
    )
