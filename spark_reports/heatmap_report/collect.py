"""The heatmap report's sizes (worst brokers drawn, spike windows listed, drill-downs)
and its one read beyond the pass: the 1-second cells of the worst spike windows, from
the 1 s table (only those brokers and minutes) in one Spark action. The figures
themselves come from the driver's aggregate (heatmap_report.chunked and merge)."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_reports import schema
from spark_reports.heatmap_report import frames as hf
from spark_reports.heatmap_report import merge

WORST_BROKERS = 4  # per-broker heatmaps in the report
SPIKES_LISTED = 1000  # spike rows listed in the report, first in time (all are in percentiles/)
DRILLS = 40  # spike windows, worst first, carried with their 1-second heatmap


def drill_windows(spikes: pd.DataFrame, n: int = DRILLS) -> list[tuple[str, int]]:
    """(broker, window start) of the ``n`` worst spike windows, worst first."""
    worst = merge.worst_spikes(spikes, n)
    return [(str(b), int(t)) for b, t in zip(worst["broker"], worst["t"], strict=True)]


def drill_cells(
    seconds: DataFrame, windows: list[tuple[str, int]], window_s: int, op: str
) -> pd.DataFrame:
    """t, broker, bucket, count of the 1 s rows inside ``windows`` (one action).

    The filter names each window's broker and time range (and its days), so
    Parquet's statistics skip row groups outside them; the quarantine rules
    run on the rows read, as on any other.
    """
    if not windows:
        return pd.DataFrame({"t": [], "broker": [], "bucket": [], "count": []})
    cond = F.lit(False)
    days = set()
    for broker, t0 in windows:
        lo = datetime.fromtimestamp(t0, tz=UTC)
        hi = datetime.fromtimestamp(t0 + window_s, tz=UTC)
        cond = cond | (
            (F.col("broker") == broker) & (F.col("ts") >= F.lit(lo)) & (F.col("ts") < F.lit(hi))
        )
        days |= {lo.date(), datetime.fromtimestamp(t0 + window_s - 1, tz=UTC).date()}
    rows = seconds.filter((F.col("op") == op) & cond)
    if schema.PARTITION_COLUMN in seconds.columns:
        rows = rows.filter(F.col(schema.PARTITION_COLUMN).isin(*sorted(days)))
    cells = (
        hf.good_rows(rows)
        .select(
            F.unix_seconds("ts").alias("t"), "broker", F.explode("buckets").alias("bucket", "count")
        )
        .toPandas()
    )
    # A broker's second is one row of an op but for a restart's rewrite of it: those add up
    # here, not in a Spark aggregate, whose shuffle was half the drill-downs' read (40
    # windows of the 100-broker day, warm: 3.7 s -> 1.8 s)
    return cells.groupby(["t", "broker", "bucket"], as_index=False, sort=True)["count"].sum()
