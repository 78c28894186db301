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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):  # spark-submit runs this file as a script
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from spark_reports.errors import EmptyInput, ReportError  # noqa: E402

OUTPUTS = ["heatmap", "percentiles", "quarantine", "report.html"]
MAX_DRAWN_COLUMNS = 1200  # heatmap columns drawn; finer windows are merged for drawing


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
    remote: str | None = None  # a Spark Connect server, sc://HOST:PORT
    static: bool = False  # PNG pictures (print, e-mail) instead of interactive charts
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
            remote=getattr(a, "remote", None),
            static=bool(getattr(a, "static", False)),
            progress=progress,
            debug=bool(getattr(a, "debug", False)),
        )


def run_heatmap(opts: HeatmapOptions, spark=None) -> dict:
    """Run the job; returns a summary (paths, rows, window, table read, quarantine count).

    Spark reads the log once: the rules and the merge per (window, broker, op,
    bucket) in one pass, brought back in one action (Arrow); the driver adds the
    cluster roll-up and the percentiles (heatmap_report.merge) and Spark writes
    the outputs. A second pass reads the quarantined rows when there are any, a
    small one finds the time range when the window is not given, and the
    drill-downs read a few minutes of the 1 s table.
    """
    from spark_reports import output, sources
    from spark_reports.heatmap_report import collect, merge
    from spark_reports.heatmap_report import frames as hf
    from spark_reports.heatmap_report.page import ReportData, heatmap_verdict, render_report
    from spark_reports.schema import LATENCY_TABLE, conform_spark_frame
    from spark_reports.session import get_session

    if opts.start and opts.end and opts.start >= opts.end:
        raise ReportError(
            f"--from {opts.start:%Y-%m-%dT%H:%M:%SZ} is not before --to {opts.end:%Y-%m-%dT%H:%M:%SZ}"
        )
    spark = spark or get_session(
        opts.master, "floodgate-report-heatmap", opts.progress, debug=opts.debug,
        remote=opts.remote,
    )
    # Timestamps as the contract stores them (UTC micros), whoever made the session.
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    source = sources.pick_source(spark, opts.input, opts.start, opts.end, opts.window_s)
    window_s = opts.window_s
    if window_s is None:
        window_s = hf.choose_window_s(_span_s(opts, *_time_range(spark, source, opts)))
        if source.rollup and window_s % sources.MINUTE_S:  # the range wants seconds after all
            source = sources.LatencySource(LATENCY_TABLE, source.seconds_path, source.seconds_path)
    checked = _checked(spark, source, opts)
    # The pass, kept by a local checkpoint: the driver reads it (Arrow) and Spark
    # writes heatmap/ from it (shipping 2.5 M rows back from Python took 5-9 s a day).
    entries = hf.window_entries(checked, window_s).localCheckpoint()
    merged = merge.from_arrow(entries.toArrow(), window_s, 59 if source.rollup else 0)
    per_op, reasons = merged.per_op, merged.reasons
    if not per_op:
        raise EmptyInput(f"no latency rows in {source.path}{_filters_text(opts)}")
    first = min(r["first"] for r in per_op.values())
    last = max(r["last"] for r in per_op.values())
    span_s = _span_s(opts, first, last)

    staged = output.StagedOutput(spark, opts.out)
    try:
        pcts = merge.percentiles(merged.groups)
        report_op = _report_op(opts.ops, per_op)
        # Pictures need at most ~1,200 columns: coarser windows for them only.
        draw_s = window_s * max(1, math.ceil(span_s / window_s / MAX_DRAWN_COLUMNS))
        data = collect.report_data(merged, pcts, report_op, draw_s)
        verdict = heatmap_verdict(
            report_op, data.pop("worst_window"), window_s, data["spike_total"],
            data.pop("spike_brokers"), data.pop("brokers"), data.pop("calls_over"),
        )  # fmt: skip
        drills = []
        with ThreadPoolExecutor(max_workers=1) as pool:
            clusters = pool.submit(_clusters, spark, source, opts)
            # The drill-downs' read of the 1 s table runs while the outputs are
            # written: two Spark jobs at once keep both cores busy through each
            # one's planning and single-task stages.
            cells = None
            if not opts.static and window_s > 1 and source.seconds_path:
                drills = collect.drill_windows(data["spikes"])
                seconds = conform_spark_frame(_read(spark, source.seconds_path))
                cells = pool.submit(collect.drill_cells, seconds, drills, window_s, report_op)
            write_tables(spark, staged, checked, entries, merged, pcts)
            if cells is not None:
                data["drill_cells"] = cells.result()
        total_rows = sum(r["rows"] for r in per_op.values())
        html = render_report(
            ReportData(
                title=f"Latency report: {_clusters_text(opts.cluster, clusters.result())}, op {report_op}",
                source=opts.input, first=first, last=last, window_s=window_s, rows=total_rows,
                quarantined=reasons, op=report_op, verdict=verdict, table=source.table,
                drills=drills, static=opts.static, **data,
            )
        )  # fmt: skip
        staged.write_bytes("report.html", html.encode("utf-8"))
        staged.promote(OUTPUTS)
    except BaseException:
        staged.discard()
        raise
    finally:
        entries.unpersist()
    return {
        "out": opts.out,
        "outputs": {name: f"{opts.out.rstrip('/')}/{name}" for name in OUTPUTS},
        "rows": total_rows,
        "table": source.table,
        "quarantined": sum(reasons.values()),
        "quarantine_reasons": reasons,
        "window_s": window_s,
        "first": first.isoformat(),
        "last": last.isoformat(),
        "ops": sorted(per_op),
        "report_op": report_op,
        "spikes": data["spike_total"],
        "drills": len(drills),
        "verdict": verdict,
    }


def write_tables(spark, staged, checked, entries, merged, pcts: dict) -> None:
    """quarantine/, heatmap/ and percentiles/ under ``staged``.

    heatmap/ is the brokers' rows of ``entries`` (frames.window_entries, kept)
    and the cluster's from the driver; percentiles/ comes from the driver. The
    quarantined rows are read again only when the pass counted some.
    """
    from pyspark.sql import functions as F

    from spark_reports.heatmap_report import frames as hf
    from spark_reports.heatmap_report import merge

    bad = hf.bad_rows(checked)
    if not merged.reasons:  # commonly: an empty output of the same columns, no pass
        bad = spark.createDataFrame([], bad.schema)
    bad.write.parquet(staged.path("quarantine"))
    brokers = entries.filter(F.col("reason").isNull() & F.col("bucket").isNotNull())
    columns = ["window_start", "broker", "op", "bucket", "count"]
    cluster = spark.createDataFrame(merge.heatmap_table(merged, brokers=False))
    brokers.select(*columns).unionByName(cluster).write.parquet(staged.path("heatmap"))
    spark.createDataFrame(merge.percentiles_table(merged, pcts)).write.parquet(
        staged.path("percentiles")
    )


def _checked(spark, source, opts: HeatmapOptions):
    """The selected rows with their quarantine ``reason`` (a plan: nothing runs yet)."""
    from spark_reports.heatmap_report import frames as hf
    from spark_reports.schema import conform_spark_frame

    raw = conform_spark_frame(_read(spark, source.path))
    selected = hf.select_rows(raw, opts.start, opts.end, opts.cluster, opts.brokers, opts.ops)
    return hf.with_quarantine_reason(selected)


def _time_range(spark, source, opts: HeatmapOptions) -> tuple[datetime, datetime]:
    """First and last time of the selected rows (any rule broken), from their ts
    alone: Parquet reads that column only, and the window follows from it."""
    from pyspark.sql import functions as F

    from spark_reports.heatmap_report import frames as hf
    from spark_reports.schema import conform_spark_frame

    raw = conform_spark_frame(_read(spark, source.path))
    selected = hf.select_rows(raw, opts.start, opts.end, opts.cluster, opts.brokers, opts.ops)
    got = selected.agg(F.unix_seconds(F.min("ts")), F.unix_seconds(F.max("ts"))).first()
    if got[0] is None:
        raise EmptyInput(f"no latency rows in {source.path}{_filters_text(opts)}")
    tail = 59 if source.rollup else 0  # a minute row's ts is its first second
    return datetime.fromtimestamp(got[0], tz=UTC), datetime.fromtimestamp(got[1] + tail, tz=UTC)


def _clusters(spark, source, opts: HeatmapOptions, most: int = 10) -> list[str]:
    """The cluster names in the selected rows (up to most + 1), for the page's title."""
    from spark_reports.heatmap_report import frames as hf
    from spark_reports.schema import conform_spark_frame

    raw = conform_spark_frame(_read(spark, source.path))
    selected = hf.select_rows(raw, opts.start, opts.end, opts.cluster, opts.brokers, opts.ops)
    rows = selected.select("cluster").distinct().limit(most + 1).collect()
    return sorted(str(r["cluster"]) for r in rows if r["cluster"] is not None)


def _clusters_text(asked: str | None, names: list[str], most: int = 10) -> str:
    if asked:
        return f"cluster {asked}"
    if len(names) > most:
        return f"more than {most} clusters"
    if not names:
        return "no cluster named"
    return f"cluster{'s' if len(names) > 1 else ''} {', '.join(names)}"


def _span_s(opts: HeatmapOptions, first: datetime, last: datetime) -> float:
    return ((opts.end or last) - (opts.start or first)).total_seconds() + (0 if opts.end else 1)


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
    p.add_argument("--remote", help="Spark Connect server, sc://HOST:PORT")
    p.add_argument("--static", action="store_true", help="PNG pictures instead of interactive charts")
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
    return 1 if summary["verdict"].get("pass") is False else 0  # as `floodgate report heatmap`


if __name__ == "__main__":
    sys.exit(main())
