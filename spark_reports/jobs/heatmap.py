"""The latency heatmap job: metrics log -> heatmap/, percentiles/, quarantine/, report.html.

Runs from `floodgate report heatmap ...` (local[*] by default) and, unchanged,
under spark-submit on a cluster:

    spark-submit --master yarn spark_reports/jobs/heatmap.py --input hdfs:///logs/d11 --out hdfs:///reports/d11

The session, paths and writing live here; the computation is the pure frames
of spark_reports.heatmap_report.frames.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):  # spark-submit runs this file as a script
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from spark_reports.errors import EmptyInput, ReportError  # noqa: E402

OUTPUTS = ["heatmap", "percentiles", "quarantine", "report.html"]
WORST_BROKERS = 4  # per-broker heatmaps in the report
MAX_DRAWN_COLUMNS = 1200  # heatmap PNG columns; finer windows are merged for drawing
SPIKES_LISTED = 1000  # spike rows listed in the report (all are in percentiles/)


@dataclass
class HeatmapOptions:
    input: str
    out: str
    start: datetime | None = None
    end: datetime | None = None
    cluster: str | None = None
    brokers: list[str] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    window_s: int | None = None
    master: str | None = None
    progress: bool = True
    debug: bool = False  # the JVM's stderr and Spark's warnings to ours (else to a log)

    @classmethod
    def from_args(cls, a, progress: bool = True) -> HeatmapOptions:
        """From parsed command-line options (spark-submit's and `floodgate report`'s)."""
        from spark_reports.heatmap_report.frames import parse_window

        return cls(
            input=a.input,
            out=a.out,
            start=parse_time(a.start, "--from"),
            end=parse_time(a.end, "--to"),
            cluster=a.cluster,
            brokers=split_list(a.broker),
            ops=split_list(a.op),
            window_s=parse_window(a.window) if a.window else None,
            master=a.master,
            progress=progress,
            debug=bool(getattr(a, "debug", False)),
        )


def run_heatmap(opts: HeatmapOptions, spark=None) -> dict:
    """Run the job; returns a summary (paths, rows, window, quarantine count)."""
    from spark_reports import output, schema
    from spark_reports.heatmap_report import frames as hf
    from spark_reports.session import get_session

    if opts.start and opts.end and opts.start >= opts.end:
        raise ReportError(
            f"--from {opts.start:%Y-%m-%dT%H:%M:%SZ} is not before --to {opts.end:%Y-%m-%dT%H:%M:%SZ}"
        )
    spark = spark or get_session(
        opts.master, "floodgate-report-heatmap", opts.progress, debug=opts.debug
    )
    latency_path = f"{opts.input.rstrip('/')}/{schema.LATENCY_TABLE}"
    raw = _read(spark, latency_path)
    raw = schema.conform_spark_frame(raw)
    selected = hf.select_rows(raw, opts.start, opts.end, opts.cluster, opts.brokers, opts.ops)
    per_op = _rows_per_op(selected)
    if not per_op:
        raise EmptyInput(f"no latency rows in {latency_path}{_filters_text(opts)}")
    first = min(r["first"] for r in per_op.values())
    last = max(r["last"] for r in per_op.values())
    span_s = ((opts.end or last) - (opts.start or first)).total_seconds() + (0 if opts.end else 1)
    window_s = opts.window_s or hf.choose_window_s(span_s)

    staged = output.StagedOutput(spark, opts.out)
    try:
        checked = hf.with_quarantine_reason(selected)
        hf.bad_rows(checked).write.parquet(staged.path("quarantine"))
        reasons = {
            r["reason"]: r["n"]
            for r in spark.read.parquet(staged.path("quarantine"))
            .groupBy("reason")
            .agg(_count().alias("n"))
            .collect()
        }
        good = hf.good_rows(selected)
        # Per broker and "ALL" in one job: the rollup reuses the aggregation's shuffle.
        hf.with_cluster_rows(hf.window_aggregate(good, window_s)).write.parquet(
            staged.path("_aggregate")
        )
        agg = spark.read.parquet(staged.path("_aggregate"))
        hf.buckets_of(agg).write.parquet(staged.path("heatmap"))
        buckets = spark.read.parquet(staged.path("heatmap"))
        stats = hf.stats_of(agg)
        hf.percentiles(buckets, stats).write.parquet(staged.path("percentiles"))
        pcts = spark.read.parquet(staged.path("percentiles"))
        report_op = _report_op(opts.ops, per_op)
        # Pictures need at most ~1,200 columns: coarser windows for them only.
        n_windows = span_s / window_s
        draw_s = window_s * max(1, math.ceil(n_windows / MAX_DRAWN_COLUMNS))
        data = _collect_report_data(spark, buckets, stats, pcts, report_op, draw_s)
        from spark_reports.heatmap_report.page import ReportData, heatmap_verdict, render_report

        verdict = heatmap_verdict(
            report_op, data.pop("worst_window"), window_s, data["spike_total"],
            data.pop("spike_brokers"), data.pop("brokers"), data.pop("calls_over"),
        )  # fmt: skip

        total_rows = sum(r["rows"] for r in per_op.values())
        html = render_report(
            ReportData(
                title=f"Latency report: {opts.cluster or 'all clusters'}, op {report_op}",
                source=opts.input,
                first=first,
                last=last,
                window_s=window_s,
                rows=total_rows,
                quarantined=reasons,
                op=report_op,
                verdict=verdict,
                **data,
            )
        )
        staged.write_bytes("report.html", html.encode("utf-8"))
        staged.promote(OUTPUTS)
    except BaseException:
        staged.discard()
        raise
    return {
        "out": opts.out,
        "outputs": {name: f"{opts.out.rstrip('/')}/{name}" for name in OUTPUTS},
        "rows": total_rows,
        "quarantined": sum(reasons.values()),
        "quarantine_reasons": reasons,
        "window_s": window_s,
        "first": first.isoformat(),
        "last": last.isoformat(),
        "ops": sorted(per_op),
        "report_op": report_op,
        "spikes": data["spike_total"],
        "verdict": verdict,
    }


def _count():
    from pyspark.sql import functions as F

    return F.count(F.lit(1))


def _read(spark, path: str):
    from pyspark.errors import AnalysisException

    from spark_reports import output

    if not output.exists(spark, path):
        raise EmptyInput(f"no metrics log at {path} (expected {path}/date=YYYY-MM-DD/*.parquet)")
    try:
        return spark.read.parquet(path)
    except AnalysisException as exc:
        if "UNABLE_TO_INFER_SCHEMA" in str(exc) or "Unable to infer schema" in str(exc):
            raise EmptyInput(f"no Parquet files under {path}") from None
        raise ReportError(f"cannot read {path}: {str(exc).splitlines()[0]}") from None


def _rows_per_op(selected) -> dict:
    """One cheap pass over ts and op only: rows and time range per op."""
    from pyspark.sql import functions as F

    rows = selected.groupBy("op").agg(
        F.count(F.lit(1)).alias("rows"),
        F.unix_seconds(F.min("ts")).alias("first"),
        F.unix_seconds(F.max("ts")).alias("last"),
    )
    out = {}
    for r in rows.collect():
        if r["first"] is not None:
            out[r["op"] if r["op"] is not None else "(null)"] = {
                "rows": r["rows"],
                "first": datetime.fromtimestamp(r["first"], tz=UTC),
                "last": datetime.fromtimestamp(r["last"], tz=UTC),
            }
    return out


def _report_op(asked: list[str], per_op: dict) -> str:
    from spark_reports.schema import KNOWN_OPS

    if asked:
        return asked[0]
    known = sorted(op for op in per_op if op in KNOWN_OPS) or sorted(per_op)
    return "send" if "send" in per_op else known[0]


def _filters_text(opts: HeatmapOptions) -> str:
    parts = []
    if opts.start:
        parts.append(f"from {opts.start:%Y-%m-%dT%H:%M:%SZ}")
    if opts.end:
        parts.append(f"to {opts.end:%Y-%m-%dT%H:%M:%SZ}")
    if opts.cluster:
        parts.append(f"cluster {opts.cluster}")
    if opts.brokers:
        parts.append(f"broker {','.join(opts.brokers)}")
    if opts.ops:
        parts.append(f"op {','.join(opts.ops)}")
    return f" ({', '.join(parts)})" if parts else ""


def _collect_report_data(spark, buckets, stats, pcts, op: str, draw_s: int) -> dict:
    """The small pieces the HTML report draws, collected to the driver."""
    from pyspark.sql import functions as F

    from heatmap.sla import SLA_MAX_S
    from spark_reports.heatmap_report import frames as hf

    of_op = F.col("op") == op
    epoch = F.unix_seconds("window_start").alias("t")  # epochs: no time-zone guessing in pandas
    spike_windows = (
        pcts.filter(of_op)
        .groupBy("broker")
        .agg(F.sum((F.col("max") > F.lit(SLA_MAX_S)).cast("long")).alias("spike_windows"))
    )
    ranking = (
        hf.broker_ranking(buckets.filter(of_op), stats.filter(of_op))
        .join(spike_windows, "broker", "left")
        .fillna(0, subset=["spike_windows"])
        .toPandas()
    )
    brokers = ranking[ranking["broker"] != hf.ALL_BROKERS]
    worst = (
        brokers.sort_values(["p999", "max"], ascending=False).head(WORST_BROKERS)["broker"].tolist()
    )
    wanted = [hf.ALL_BROKERS, *worst]
    secs = F.unix_seconds("window_start")
    cells = (
        buckets.filter(of_op & F.col("broker").isin(*wanted))
        .groupBy((secs - F.pmod(secs, F.lit(draw_s))).alias("t"), "broker", "bucket")
        .agg(F.sum("count").alias("count"))
    )
    curves = pcts.filter(of_op & (F.col("broker") == hf.ALL_BROKERS)).select(
        epoch, "count", "mean", "p50", "p99", "p999", "max"
    )
    spikes = hf.spikes(pcts.filter(of_op))
    worst_window = (
        pcts.filter(of_op & (F.col("broker") != hf.ALL_BROKERS))
        .orderBy(F.col("max").desc(), "window_start", "broker")
        .select(epoch, "broker", "max")
        .limit(1)
        .collect()
    )
    return {
        "cells": cells.toPandas(),
        "cells_window_s": draw_s,
        "worst_brokers": worst,
        "curves": curves.orderBy("t").toPandas(),
        "ranking": ranking,
        "spikes": spikes.limit(SPIKES_LISTED)
        .select(epoch, "broker", "max", "p999", "count")
        .toPandas(),
        "spike_total": int(brokers["spike_windows"].sum()),
        "worst_window": worst_window[0].asDict() if worst_window else None,
        "spike_brokers": int((brokers["spike_windows"] > 0).sum()),
        "brokers": len(brokers),
        "calls_over": int(ranking.loc[ranking["broker"] == hf.ALL_BROKERS, "over_20ms"].sum()),
    }


def parse_args(argv: list[str] | None = None) -> HeatmapOptions:
    """Arguments as spark-submit passes them (the same names as the CLI)."""

    p = argparse.ArgumentParser(prog="heatmap.py", description=__doc__.splitlines()[0])
    p.add_argument("--input", required=True, help="metrics log directory or URI")
    p.add_argument("--out", required=True, help="output directory or URI")
    p.add_argument("--from", dest="start", help="first time, ISO 8601 UTC (inclusive)")
    p.add_argument("--to", dest="end", help="last time, ISO 8601 UTC (exclusive)")
    p.add_argument("--cluster")
    p.add_argument("--broker", action="append", default=[], help="repeat or comma-separate")
    p.add_argument("--op", action="append", default=[], help="repeat or comma-separate")
    p.add_argument("--window", help="1s, 10s, 1m, 5m ... (default: from the time range)")
    p.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    return HeatmapOptions.from_args(p.parse_args(argv))


def parse_time(text: str | None, flag: str) -> datetime | None:
    if text is None:
        return None
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ReportError(f"{flag}: not an ISO 8601 time: {text!r}") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def split_list(values: list[str]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def main(argv: list[str] | None = None) -> int:
    try:
        summary = run_heatmap(parse_args(argv))
    except ReportError as exc:
        print(f"heatmap: error: {exc}", file=sys.stderr)
        return 1
    print(f"heatmap: {summary['verdict']['line']}")
    print(
        f"heatmap: {summary['rows']:,} rows, {summary['quarantined']:,} quarantined, "
        f"window {summary['window_s']} s -> {summary['outputs']['report.html']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
