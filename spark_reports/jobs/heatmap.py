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
    slice_rows: int | None = None  # the driver's slice of the aggregate (rows); None: chunked's
    static: bool = False  # PNG pictures (print, e-mail) instead of interactive charts
    progress: bool = True
    debug: bool = False  # the JVM's stderr and Spark's warnings to ours (else to a log)

    @classmethod
    def from_args(cls, a, progress: bool = True) -> HeatmapOptions:
        """From parsed command-line options (spark-submit's and `floodgate report`'s)."""
        from spark_reports.heatmap_report.windows import parse_window

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
    import pandas as pd

    from spark_reports import output, sources
    from spark_reports.heatmap_report import chunked, collect, merge
    from spark_reports.heatmap_report import frames as hf
    from spark_reports.heatmap_report.page import ReportData, heatmap_verdict, render_report
    from spark_reports.schema import LATENCY_TABLE
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
    first, last, brokers, clusters = _shape(spark, source, opts)
    window_s = opts.window_s
    if window_s is None:
        window_s = hf.choose_window_s(_span_s(opts, first, last))
        if source.rollup and window_s % sources.MINUTE_S:  # the range wants seconds after all
            source = sources.LatencySource(LATENCY_TABLE, source.seconds_path, source.seconds_path)
    tail_s = 59 if source.rollup else 0
    checked = _checked(spark, source, opts)
    windows = math.ceil(_span_s(opts, first, last) / window_s)
    slices = chunked.slices_for(brokers, windows, len(opts.ops) or 2, opts.slice_rows)
    overview, tables = _pass(hf.window_entries(checked, window_s), slices)
    per_op, reasons = merge.overview(overview, tail_s)
    timed = {op: r for op, r in per_op.items() if r["first"] is not None}
    if not timed:
        raise EmptyInput(f"no latency rows in {source.path}{_filters_text(opts)}")
    first = min(r["first"] for r in timed.values())
    last = max(r["last"] for r in timed.values())
    span_s = _span_s(opts, first, last)
    report_op = _report_op(opts.ops, timed)
    # Pictures need at most ~1,200 columns: coarser windows for them only.
    draw_s = window_s * max(1, math.ceil(span_s / window_s / MAX_DRAWN_COLUMNS))

    staged = output.StagedOutput(spark, opts.out)
    wants_drills = not opts.static and window_s > 1 and bool(source.seconds_path)
    try:
        # The drill-downs' read of the 1 s table runs beside the driver's finish and
        # quarantine/'s write: two Spark jobs at once keep both cores busy through each
        # one's planning and single-task stages. Their windows, the worst spike windows,
        # come from the pass's rows (merge.spike_windows): with the pass in one slice the
        # read starts before the finish, else after the last slice.
        with ThreadPoolExecutor(max_workers=1) as pool:
            drills, cells, worst = [], None, None
            finish = chunked.Finish(window_s, report_op, draw_s, collect.WORST_BROKERS,
                                    collect.SPIKES_LISTED)  # fmt: skip
            for part, table in enumerate(tables):  # one slice of brokers at a time
                if wants_drills:
                    worst = merge.worst_spikes(
                        pd.concat([worst, merge.spike_windows(table, report_op)]), collect.DRILLS
                    )
                    if slices == 1:
                        drills, cells = _drills(spark, pool, source, window_s, report_op, worst)
                heat, rows = finish.add(merge.from_arrow(table, window_s, tail_s))
                del table
                staged.write_table(spark, "heatmap", heat, part)
                staged.write_table(spark, "percentiles", rows, part)
            if wants_drills and slices > 1:
                drills, cells = _drills(spark, pool, source, window_s, report_op, worst)
            cluster, pcts, data = finish.done()
            staged.write_table(spark, "heatmap", merge.heatmap_table(cluster), slices)
            staged.write_table(spark, "percentiles", merge.percentiles_table(cluster, pcts),
                               slices)  # fmt: skip
            verdict = heatmap_verdict(
                report_op, data.pop("worst_window"), window_s, data["spike_total"],
                data.pop("spike_brokers"), data.pop("brokers"), data.pop("calls_over"),
            )  # fmt: skip
            write_quarantine(spark, staged, checked, reasons)
            if cells is not None:
                data["drill_cells"] = cells.result()
        total_rows = sum(r["rows"] for r in per_op.values())
        html = render_report(
            ReportData(
                title=f"Latency report: {_clusters_text(opts.cluster, clusters)}, op {report_op}",
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


def _drills(spark, pool, source, window_s: int, op: str, spikes):
    """(the worst spike windows, a future of their 1 s cells) read on ``pool``."""
    from spark_reports.heatmap_report import collect
    from spark_reports.schema import conform_spark_frame

    drills = collect.drill_windows(spikes)
    seconds = conform_spark_frame(_read(spark, source.seconds_path))
    return drills, pool.submit(collect.drill_cells, seconds, drills, window_s, op)


def write_quarantine(spark, staged, checked, reasons: dict) -> None:
    """quarantine/: the rows that break a rule, read again only when the pass counted some."""
    from spark_reports.heatmap_report import frames as hf

    bad = hf.bad_rows(checked)
    if not reasons:  # commonly: an empty output of the same columns, no pass
        bad = spark.createDataFrame([], bad.schema)
    bad.write.parquet(staged.path("quarantine"))


def _pass(entries, slices: int):
    """(overview rows, the aggregate's Arrow tables, one slice of brokers each).

    One slice: the pass comes back in one action and its own rows give the overview.
    More: the pass is kept by a local checkpoint with each row's slice (a hash of
    its broker), the overview is a small query on it, and the slices come back one
    by one while the driver finishes and drops each (chunked.Finish).
    """
    from pyspark.sql import functions as F

    if slices == 1:
        table = entries.toArrow()
        return table.select(["op", "reason", "rows", "first", "last"]), [table]
    kept = entries.withColumn("_slice", F.pmod(F.xxhash64("broker"), F.lit(slices))).localCheckpoint()
    overview = kept.groupBy("op", "reason").agg(
        F.sum("rows").alias("rows"), F.min("first").alias("first"), F.max("last").alias("last")
    ).toArrow()  # fmt: skip

    def tables():
        for i in range(slices):
            yield kept.filter(F.col("_slice") == i).drop("_slice").toArrow()
        kept.unpersist()

    return overview, tables()


def _checked(spark, source, opts: HeatmapOptions):
    """The selected rows with their quarantine ``reason`` (a plan: nothing runs yet)."""
    from spark_reports.heatmap_report import frames as hf
    from spark_reports.schema import conform_spark_frame

    raw = conform_spark_frame(_read(spark, source.path))
    selected = hf.select_rows(raw, opts.start, opts.end, opts.cluster, opts.brokers, opts.ops)
    return hf.with_quarantine_reason(selected)


def _shape(spark, source, opts: HeatmapOptions) -> tuple[datetime, datetime, int, list[str]]:
    """First and last time of the selected rows (any rule broken), how many brokers they
    name and the clusters (for the page's title), from ts, broker and cluster alone
    (Parquet reads those columns only): the window and the slices the driver takes the
    aggregate in follow from them."""
    from pyspark.sql import functions as F

    from spark_reports.heatmap_report import frames as hf
    from spark_reports.schema import conform_spark_frame

    raw = conform_spark_frame(_read(spark, source.path))
    selected = hf.select_rows(raw, opts.start, opts.end, opts.cluster, opts.brokers, opts.ops)
    got = selected.agg(F.unix_seconds(F.min("ts")), F.unix_seconds(F.max("ts")),
                       F.approx_count_distinct("broker"), F.collect_set("cluster")).first()  # fmt: skip
    if got[0] is None:
        raise EmptyInput(f"no latency rows in {source.path}{_filters_text(opts)}")
    tail = 59 if source.rollup else 0  # a minute row's ts is its first second
    return (datetime.fromtimestamp(got[0], tz=UTC), datetime.fromtimestamp(got[1] + tail, tz=UTC),
            int(got[2]), sorted(str(c) for c in got[3]))  # fmt: skip


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
