"""The small pieces the heatmap report draws, gathered from the job's outputs in
four actions: the broker ranking (with each broker's spike windows and worst
window), the cluster curves with every spike window, the heatmap cells of the
cluster and the worst brokers, and the 1-second cells of the worst spike
windows (read from the 1 s table, only those brokers and minutes)."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from heatmap.sla import SLA_MAX_S
from spark_reports import schema
from spark_reports.heatmap_report import frames as hf

WORST_BROKERS = 4  # per-broker heatmaps in the report
SPIKES_LISTED = 1000  # spike rows listed in the report (all are in percentiles/)
DRILLS = 40  # spike windows, worst first, carried with their 1-second heatmap


def report_data(
    buckets: DataFrame, stats: DataFrame, pcts: DataFrame, op: str, draw_s: int
) -> dict:
    """Ranking, curves, spikes, cells and the verdict's figures (three actions)."""
    of_op = F.col("op") == op
    secs = F.unix_seconds("window_start")
    per_broker = (
        pcts.filter(of_op & (F.col("broker") != hf.ALL_BROKERS))
        .groupBy("broker")
        .agg(
            F.sum((F.col("max") > F.lit(SLA_MAX_S)).cast("long")).alias("spike_windows"),
            # the worst window; of equal maxima the earliest
            F.max_by(secs, F.struct(F.col("max"), -secs)).alias("worst_t"),
        )
    )
    ranking = (
        hf.broker_ranking(buckets.filter(of_op), stats.filter(of_op))
        .join(per_broker, "broker", "left")
        .fillna(0, subset=["spike_windows"])
        .toPandas()
    )
    brokers = ranking[ranking["broker"] != hf.ALL_BROKERS]
    worst = brokers.sort_values(["p999", "max"], ascending=False).head(WORST_BROKERS)
    wanted = [hf.ALL_BROKERS, *worst["broker"].tolist()]
    windows = (
        pcts.filter(
            of_op & ((F.col("broker") == hf.ALL_BROKERS) | (F.col("max") > F.lit(SLA_MAX_S)))
        )
        .select(secs.alias("t"), "broker", "count", "mean", "p50", "p99", "p999", "max")
        .toPandas()
    )
    curves = windows[windows["broker"] == hf.ALL_BROKERS].sort_values("t").drop(columns="broker")
    spikes = windows[windows["broker"] != hf.ALL_BROKERS].sort_values(
        ["t", "max"], ascending=[True, False]
    )
    cells = (
        buckets.filter(of_op & F.col("broker").isin(*wanted))
        .groupBy((secs - F.pmod(secs, F.lit(draw_s))).alias("t"), "broker", "bucket")
        .agg(F.sum("count").alias("count"))
        .toPandas()
    )
    timed = brokers.dropna(subset=["max"])
    top = timed.sort_values(["max", "worst_t", "broker"], ascending=[False, True, True]).head(1)
    worst_window = (
        {
            "t": int(top.iloc[0]["worst_t"]),
            "broker": top.iloc[0]["broker"],
            "max": float(top.iloc[0]["max"]),
        }
        if len(top)
        else None
    )
    return {
        "cells": cells,
        "cells_window_s": draw_s,
        "worst_brokers": worst["broker"].tolist(),
        "curves": curves.reset_index(drop=True),
        "ranking": ranking,
        "spikes": spikes.head(SPIKES_LISTED).reset_index(drop=True),
        "spike_total": int(brokers["spike_windows"].sum()),
        "worst_window": worst_window,
        "spike_brokers": int((brokers["spike_windows"] > 0).sum()),
        "brokers": len(brokers),
        "calls_over": int(ranking.loc[ranking["broker"] == hf.ALL_BROKERS, "over_20ms"].sum()),
    }


def drill_windows(spikes: pd.DataFrame, n: int = DRILLS) -> list[tuple[str, int]]:
    """(broker, window start) of the ``n`` worst spike windows, worst first."""
    worst = spikes.sort_values(["max", "t", "broker"], ascending=[False, True, True]).head(n)
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
    return (
        hf.good_rows(rows)
        .select(
            F.unix_seconds("ts").alias("t"), "broker", F.explode("buckets").alias("bucket", "n")
        )
        .groupBy("t", "broker", "bucket")
        .agg(F.sum("n").alias("count"))
        .toPandas()
    )
