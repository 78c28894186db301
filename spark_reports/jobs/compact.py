"""The compact job: build ``latency_1m`` (minute rollups) for a log that lacks it.

    floodgate report compact --input LOG [--force] [--master URL]
    spark-submit spark_reports/jobs/compact.py --input hdfs:///metrics/d11

Brokers and the generator write minute rollups themselves; this is for logs
written before they did (or copied without them). Days that already have
``latency_1m/`` are left alone unless --force. Rows that break a quarantine
rule are left out of the rollup and counted by reason; only the days written
are replaced (Spark's dynamic partition overwrite), so readers of other days
are never disturbed.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # spark-submit runs this file as a script
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from spark_reports.errors import EmptyInput, ReportError  # noqa: E402


@dataclass
class CompactOptions:
    input: str
    force: bool = False
    master: str | None = None
    remote: str | None = None  # a Spark Connect server, sc://HOST:PORT
    progress: bool = True
    debug: bool = False


def minute_rollup(good):
    """``latency`` rows (already validated) -> ``latency_1m`` rows, plus ``date``.

    One shuffle merges bucket counts per (minute, broker, op, bucket); each
    row's scalars ride on its first exploded entry (as in the heatmap's
    window_entries), then a second, small grouping gathers a minute's buckets
    into its map in index order. Pure DataFrame functions: no Python runs on
    executors.
    """
    from pyspark.sql import functions as F

    from spark_reports.heatmap_report.frames import window_start

    keys = ["ts", "cluster", "broker", "op", "date"]
    entries = good.select(
        window_start(60).alias("ts"), "cluster", "broker", "op", "date", "count", "sum_us",
        "min_us", "max_us", "msgs", "bytes",
        F.posexplode_outer("buckets").alias("pos", "bucket", "n"),
    )  # fmt: skip
    first = F.col("pos").isNull() | (F.col("pos") == 0)
    timed = first & (F.col("count") > 0)
    per_bucket = entries.groupBy(*keys, "bucket").agg(
        F.sum("n").alias("n"),
        *[F.sum(F.when(first, F.col(c))).alias(c) for c in ("count", "sum_us", "msgs", "bytes")],
        F.min(F.when(timed, F.col("min_us"))).alias("min_us"),
        F.max(F.when(timed, F.col("max_us"))).alias("max_us"),
    )
    entry = F.when(F.col("bucket").isNotNull(), F.struct("bucket", "n"))
    rows = per_bucket.groupBy(*keys).agg(
        *[F.sum(c).alias(c) for c in ("count", "sum_us", "msgs", "bytes")],
        F.coalesce(F.min("min_us"), F.lit(0).cast("bigint")).alias("min_us"),
        F.coalesce(F.max("max_us"), F.lit(0).cast("bigint")).alias("max_us"),
        F.map_from_entries(F.array_sort(F.collect_list(entry))).alias("buckets"),
    )
    columns = ["ts", "cluster", "broker", "op", "count", "sum_us", "min_us", "max_us",
               "buckets", "msgs", "bytes", "date"]  # fmt: skip
    return rows.select(*columns)


def run_compact(opts: CompactOptions, spark=None) -> dict:
    from pyspark.sql import functions as F

    from spark_reports import schema, sources
    from spark_reports.heatmap_report import frames as hf
    from spark_reports.session import get_session

    spark = spark or get_session(opts.master, "floodgate-report-compact", opts.progress,
                                 debug=opts.debug, remote=opts.remote)  # fmt: skip
    seconds_path = sources.table_path(opts.input, schema.LATENCY_TABLE)
    minutes_path = sources.table_path(opts.input, schema.LATENCY_1M_TABLE)
    days = sources.list_days(spark, seconds_path)
    if not days:
        raise EmptyInput(
            f"no metrics log at {seconds_path} (expected {seconds_path}/date=YYYY-MM-DD/)"
        )
    have = sources.list_days(spark, minutes_path)
    todo = sorted(days if opts.force else days - have)
    summary = {"input": opts.input, "days": [d.isoformat() for d in todo],
               "kept": sorted(d.isoformat() for d in have - set(todo)),
               "rows": 0, "minute_rows": 0, "quarantined": 0, "quarantine_reasons": {}}  # fmt: skip
    if not todo:
        return summary
    raw = schema.conform_spark_frame(spark.read.parquet(seconds_path))
    raw = raw.filter(F.col(schema.PARTITION_COLUMN).isin(*todo))
    checked = hf.with_quarantine_reason(raw).cache()  # the rules run once, for both uses
    try:
        counts = checked.groupBy("reason").count().collect()
        reasons = {r["reason"]: r["count"] for r in counts if r["reason"] is not None}
        rolled = minute_rollup(hf.good_rows(checked)).cache()
        spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        # Only the days rolled up are replaced; an option of this write, not of the
        # session, which reports through a Connect server share (spark_reports.connect).
        (rolled.write.mode("overwrite").option("partitionOverwriteMode", "dynamic")
         .partitionBy(schema.PARTITION_COLUMN).parquet(minutes_path))
        summary.update(
            rows=sum(r["count"] for r in counts), minute_rows=rolled.count(),
            quarantined=sum(reasons.values()), quarantine_reasons=reasons,
        )  # fmt: skip
        rolled.unpersist()
    finally:
        checked.unpersist()
    return summary


def parse_args(argv: list[str] | None = None) -> CompactOptions:
    p = argparse.ArgumentParser(prog="compact.py", description=__doc__.splitlines()[0])
    p.add_argument("--input", required=True, help="metrics log directory or URI")
    p.add_argument("--force", action="store_true", help="rebuild days that have latency_1m")
    p.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    a = p.parse_args(argv)
    return CompactOptions(input=a.input, force=a.force, master=a.master)


def main(argv: list[str] | None = None) -> int:
    try:
        s = run_compact(parse_args(argv))
    except ReportError as exc:
        print(f"compact: error: {exc}", file=sys.stderr)
        return 1
    print(f"compact: {len(s['days'])} day(s) rolled up, {s['minute_rows']:,} minute rows from "
          f"{s['rows']:,} rows, {s['quarantined']:,} quarantined")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
