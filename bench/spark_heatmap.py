"""Spark heatmap job vs the same aggregation in DuckDB, on the same Parquet files.

    .venv/bin/python bench/spark_heatmap.py                         # 20 brokers x 2 h
    .venv/bin/python bench/spark_heatmap.py --brokers 100 --hours 24  # the issue's size

Generates a Double-11 metrics log (timed: the generator's speed), then on
each latency table (``latency_1m``, the minute rollups the job reads for 5 min
windows, and the 1 s ``latency``) runs the job's hot path on local[2] (one pass
of rules and merge brought back as Arrow, the driver's roll-up and percentiles,
quarantine, heatmap and percentiles written as Parquet)
and DuckDB with 2 threads computing the same validated heatmap and percentiles
from the same files; then the whole job (report included). Prints wall times
(median of --runs), ratios, rows per second and the peak RSS of the process tree
(the Spark JVM included) beside every figure. Goal (issue 19): Spark within 3x of
DuckDB on the table the job reads (2x the goal after that).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402

GOAL_RATIO = 3.0


class PeakRss:
    """Peak RSS of this process and its children (the JVM), sampled every 100 ms."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for p in [me, *me.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self._stop.wait(0.1)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def mib(self) -> float:
        return self.peak / 2**20


def timed(fn, runs: int):
    times = []
    with PeakRss() as rss:
        for _ in range(runs):
            t0 = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times), rss.mib, result


DUCKDB_SQL = """
CREATE OR REPLACE VIEW good AS
SELECT epoch(ts)::BIGINT - epoch(ts)::BIGINT % {w} AS w, broker, op, count, sum_us, min_us, max_us, buckets
FROM read_parquet('{log}/{table}/*/*.parquet', hive_partitioning = true)
WHERE ts IS NOT NULL AND cluster IS NOT NULL AND broker IS NOT NULL AND op IS NOT NULL
  AND count IS NOT NULL AND sum_us IS NOT NULL AND min_us IS NOT NULL AND max_us IS NOT NULL
  AND buckets IS NOT NULL
  AND count >= 0 AND sum_us >= 0 AND min_us >= 0 AND max_us >= 0
  AND coalesce(msgs, 0) >= 0 AND coalesce(bytes, 0) >= 0
  AND coalesce(list_min(map_values(buckets)), 0) >= 0
  AND coalesce(list_sum(map_values(buckets)), 0) = count
  AND op IN ({ops})
  AND CAST(ts AS DATE) = "date"
  AND coalesce(list_min(map_keys(buckets)), 0) >= {zero} AND coalesce(list_max(map_keys(buckets)), 0) <= {top}
  AND NOT (count > 0 AND min_us > max_us);
COPY (
  WITH e AS (SELECT w, broker, op, unnest(map_keys(buckets)) AS bucket,
                    unnest(map_values(buckets)) AS n FROM good)
  SELECT w, coalesce(broker, 'ALL') AS broker, op, bucket, sum(n)::BIGINT AS count
  FROM e GROUP BY GROUPING SETS ((w, broker, op, bucket), (w, op, bucket))
) TO '{out}/heatmap.parquet' (FORMAT parquet);
COPY (
  WITH s AS (
    SELECT w, coalesce(broker, 'ALL') AS broker, op, sum(count) AS count, sum(sum_us) AS sum_us,
           min(CASE WHEN count > 0 THEN min_us END) AS min_us,
           max(CASE WHEN count > 0 THEN max_us END) AS max_us
    FROM good GROUP BY GROUPING SETS ((w, broker, op), (w, op))),
  c AS (
    SELECT h.*, s.count AS total, s.min_us, s.max_us,
           sum(h.count) OVER (PARTITION BY h.w, h.broker, h.op ORDER BY h.bucket) AS cum
    FROM read_parquet('{out}/heatmap.parquet') h JOIN s USING (w, broker, op)),
  b AS (
    SELECT w, broker, op, any_value(total) AS count, any_value(min_us) AS min_us, any_value(max_us) AS max_us,
      min(bucket) FILTER (WHERE cum >= greatest(ceil(0.5 * total), 1)) AS b50,
      min(bucket) FILTER (WHERE cum >= greatest(ceil(0.99 * total), 1)) AS b99,
      min(bucket) FILTER (WHERE cum >= greatest(ceil(0.999 * total), 1)) AS b999
    FROM c GROUP BY ALL)
  SELECT b.w, b.broker, b.op, b.count, s.sum_us / b.count / 1e6 AS mean,
    least(greatest(pow(2, b50 / 8.0), b.min_us / 1e6), b.max_us / 1e6) AS p50,
    least(greatest(pow(2, b99 / 8.0), b.min_us / 1e6), b.max_us / 1e6) AS p99,
    least(greatest(pow(2, b999 / 8.0), b.min_us / 1e6), b.max_us / 1e6) AS p999,
    b.max_us / 1e6 AS max
  FROM b JOIN s USING (w, broker, op)
) TO '{out}/percentiles.parquet' (FORMAT parquet);
"""


def run_duckdb(log: Path, out: Path, window_s: int, table: str = "latency") -> int:
    import duckdb

    from heatmap.layout import MAX_INDEX, ZERO_INDEX
    from spark_reports.schema import KNOWN_OPS

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    con = duckdb.connect()
    con.execute("SET threads = 2")
    ops = ", ".join(f"'{op}'" for op in KNOWN_OPS)
    sql = DUCKDB_SQL.format(w=window_s, log=log, out=out, ops=ops, zero=ZERO_INDEX, top=MAX_INDEX,
                            table=table)  # fmt: skip
    con.execute(sql)
    total = con.execute(f"SELECT sum(count) FROM read_parquet('{out}/heatmap.parquet')").fetchone()[
        0
    ]
    con.close()
    return int(total)


class _Out:
    """The job's staged output, as write_tables sees it: a folder per output."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, name: str) -> str:
        return str(self.root / name)


def run_spark_aggregation(spark, log: Path, out: Path, window_s: int, table: str = "latency") -> int:
    """The job's hot path alone, as run_heatmap does it: one pass (rules and merge)
    kept by a local checkpoint and brought back as Arrow, the driver's finish
    (cluster roll-up, percentiles), quarantine, heatmap and percentiles written as
    Parquet."""
    from spark_reports import schema
    from spark_reports.heatmap_report import frames as hf
    from spark_reports.heatmap_report import merge
    from spark_reports.jobs.heatmap import write_tables

    shutil.rmtree(out, ignore_errors=True)
    raw = schema.conform_spark_frame(spark.read.parquet(str(log / table)))
    checked = hf.with_quarantine_reason(raw)
    entries = hf.window_entries(checked, window_s).localCheckpoint()
    merged = merge.from_arrow(entries.toArrow(), window_s, 59 if table == "latency_1m" else 0)
    pcts = merge.percentiles(merged.groups)
    write_tables(spark, _Out(out), checked, entries, merged, pcts)
    total = int(spark.read.parquet(str(out / "heatmap")).agg({"count": "sum"}).collect()[0][0])
    entries.unpersist()
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", type=int, default=20)
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--ops", default="send,pull")
    ap.add_argument("--window", default="5m", help="heatmap window (default 5m)")
    ap.add_argument("--runs", type=int, default=3, help="median of this many runs (default 3)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--data", help="keep the generated log here (reused when present)")
    a = ap.parse_args()

    from spark_reports.generator import Double11Config, generate_double11
    from spark_reports.heatmap_report.frames import parse_window
    from spark_reports.jobs.heatmap import HeatmapOptions, run_heatmap
    from spark_reports.session import get_session

    window_s = parse_window(a.window)
    work = Path(tempfile.mkdtemp(prefix="bench-spark-heatmap-"))
    log = Path(a.data) if a.data else work / "log"
    cfg = Double11Config(
        brokers=a.brokers, hours=a.hours, ops=tuple(a.ops.split(",")),
        start=datetime(2026, 11, 10, 22, tzinfo=UTC),
    )  # fmt: skip
    try:
        if not (log / "latency").exists():
            with PeakRss() as rss:
                gen = generate_double11(cfg, log)
            print(
                f"generate {a.brokers} brokers x {a.hours:g} h: {gen.latency_rows:,} latency rows, "
                f"{gen.bucket_entries:,} buckets, {gen.bytes_written / 2**20:.0f} MiB in {gen.seconds:.1f} s "
                f"= {gen.latency_rows / gen.seconds:,.0f} rows/s, peak RSS {rss.mib:.0f} MiB"
            )
        t0 = time.perf_counter()
        spark = get_session(a.master, "bench-spark-heatmap", progress=False)
        print(
            f"Spark session start ({a.master}): {time.perf_counter() - t0:.1f} s (not counted below)"
        )

        ratios = {}
        for table in ("latency_1m", "latency"):
            if not (log / table).exists():
                continue
            n = _count_rows(log, table)
            duck_s, duck_rss, duck_total = timed(
                lambda t=table: run_duckdb(log, work / "duck", window_s, t), a.runs
            )
            agg_s, agg_rss, spark_total = timed(
                lambda t=table: run_spark_aggregation(spark, log, work / "spark", window_s, t), a.runs
            )
            if duck_total != spark_total:
                print(f"MISMATCH on {table}: DuckDB merged {duck_total:,} calls, Spark {spark_total:,}")
                return 1
            ratios[table] = agg_s / duck_s
            print(f"{table}: {n:,} rows; merged calls (both engines, equal): {spark_total:,}")
            print(f"  DuckDB (2 threads) heatmap+percentiles: {duck_s:.2f} s, {n / duck_s:,.0f} rows/s, "
                  f"peak RSS {duck_rss:.0f} MiB")  # fmt: skip
            print(f"  Spark {a.master} hot path:          {agg_s:.2f} s, {n / agg_s:,.0f} rows/s, "
                  f"peak RSS {agg_rss:.0f} MiB; Spark / DuckDB {ratios[table]:.2f}x")  # fmt: skip
        opts = HeatmapOptions(
            input=str(log), out=str(work / "job"), window_s=window_s, progress=False
        )
        job_s, job_rss, summary = timed(lambda: run_heatmap(opts, spark=spark), a.runs)
        spark.stop()
        html_mb = (work / "job" / "report.html").stat().st_size / 1e6
        print(f"Spark whole job on {summary['table']} (+quarantine, report, drill-downs): "
              f"{job_s:.2f} s, peak RSS {job_rss:.0f} MiB, report.html {html_mb:.1f} MB")  # fmt: skip
        ratio = ratios.get(summary["table"], float("inf"))
        print(f"Spark / DuckDB on {summary['table']}: {ratio:.2f}x (goal <= {GOAL_RATIO:g}x)")
        return 0 if ratio <= GOAL_RATIO else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _count_rows(log: Path, table: str = "latency") -> int:
    import pyarrow.dataset as ds

    return ds.dataset(str(log / table), format="parquet", partitioning="hive").count_rows()


if __name__ == "__main__":
    sys.exit(main())
