"""Spark capacity job vs the same figures in DuckDB, on the same Parquet files.

    .venv/bin/python bench/spark_capacity.py                          # 20 brokers x 2 h
    .venv/bin/python bench/spark_capacity.py --brokers 100 --hours 24

Generates a Double-11 metrics log, then computes the capacity job's measured
figures (validation, per-second cluster rates, daily peaks, per-broker load,
latency totals and merged buckets, 20 ms spikes, disk growth, per-minute
series) with `collect_measured` on Spark local[2], and the same figures with
DuckDB (2 threads, the heatmap bench's validation view). Checks both agree
(daily peaks, calls, spike seconds), prints wall times (median of --runs),
the ratio and the peak RSS of the process tree (JVM included). Both engines
do the same work: rates and spike seconds from the validated 1 s rows, latency
totals, merged buckets and the per-minute latency from the validated minute
rollups (``latency_1m``) when the log has them. Goal (issue 19): Spark within
3x of DuckDB.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from datetime import UTC, date, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_heatmap import DUCKDB_SQL, timed  # noqa: E402 - the heatmap bench's helpers

GOAL_RATIO = 3.0

DUCKDB_FIGURES = {
    "days": """
        WITH s AS (SELECT ts, sum(msgs) AS msgs FROM good WHERE op = 'send' GROUP BY ts)
        SELECT CAST(ts AS DATE) AS day, max(msgs) AS peak, sum(msgs) AS total, count(*) AS seconds,
               arg_max(ts, msgs) AS peak_ts
        FROM s GROUP BY day ORDER BY day""",
    "brokers": """
        WITH s AS (SELECT ts, broker, sum(msgs) AS msgs FROM good WHERE op = 'send' GROUP BY ts, broker)
        SELECT broker, max(msgs), avg(msgs), count(*), sum(msgs) FROM s GROUP BY broker ORDER BY broker""",
    "totals": """
        SELECT coalesce(broker, 'ALL') AS broker, sum(count) AS calls, sum(sum_us), max(max_us)
        FROM good_1m WHERE op = 'send' GROUP BY GROUPING SETS ((broker), ()) ORDER BY broker""",
    "buckets": """
        WITH e AS (SELECT broker, unnest(map_keys(buckets)) AS b, unnest(map_values(buckets)) AS n
                   FROM good_1m WHERE op = 'send')
        SELECT coalesce(broker, 'ALL'), b, sum(n) FROM e GROUP BY GROUPING SETS ((broker, b), (b))""",
    "spikes": """
        SELECT broker, count(DISTINCT ts) AS spike_seconds, max(max_us) FROM good
        WHERE op = 'send' AND max_us > {sla_max_us} GROUP BY broker ORDER BY broker""",
    "disk": """
        SELECT broker, arg_min(disk_used_bytes, ts), arg_max(disk_used_bytes, ts), max(disk_total_bytes)
        FROM read_parquet('{log}/broker_stats/*/*.parquet', hive_partitioning = true) GROUP BY broker""",
    "minutes": """
        WITH s AS (SELECT ts, sum(msgs) AS msgs FROM good WHERE op = 'send' GROUP BY ts),
             r AS (SELECT date_trunc('minute', ts) AS m, max(msgs) AS peak, avg(msgs) AS mean
                   FROM s GROUP BY m),
             l AS (SELECT date_trunc('minute', ts) AS m, sum(sum_us) / sum(count) AS mean_us,
                          max(max_us) AS max_us FROM good_1m WHERE op = 'send' GROUP BY m)
        SELECT * FROM r LEFT JOIN l USING (m) ORDER BY m""",
}


def run_duckdb(log: Path) -> dict:
    import duckdb

    from heatmap.layout import MAX_INDEX, ZERO_INDEX
    from heatmap.sla import SLA_MAX_US
    from spark_reports.schema import KNOWN_OPS

    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute("SET TimeZone = 'UTC'")
    ops = ", ".join(f"'{op}'" for op in KNOWN_OPS)
    # the heatmap bench's validation rules (its WHERE clause), over all columns
    first = DUCKDB_SQL.split("COPY (")[0]
    where = first[first.index("WHERE") :].strip().rstrip(";")
    where = where.format(ops=ops, zero=ZERO_INDEX, top=MAX_INDEX)
    minutes = "latency_1m" if (log / "latency_1m").exists() else "latency"
    for view, table in (("good", "latency"), ("good_1m", minutes)):
        con.execute(
            f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM "
            f"read_parquet('{log}/{table}/*/*.parquet', hive_partitioning = true) {where}"
        )
    out = {
        name: con.execute(sql.format(log=log, sla_max_us=SLA_MAX_US)).fetchall()
        for name, sql in DUCKDB_FIGURES.items()
    }
    con.close()
    return out


def run_spark(spark, log: Path) -> dict:
    from capacity.forecast import read_history
    from spark_reports.capacity_report.plan import Options
    from spark_reports.jobs.capacity import collect_measured

    opts = Options(target_date=date(2027, 11, 11), history=read_history())
    measured, minutes = collect_measured(spark, str(log), opts)
    return dict(measured, minutes=minutes)


def agree(duck: dict, spark: dict) -> list[str]:
    problems = []
    duck_days = {d: (p, t) for d, p, t, _, _ in duck["days"]}
    spark_days = {d["day"]: (d["peak_msgs_per_s"], d["total_msgs"]) for d in spark["days"]}
    if duck_days != spark_days:
        problems.append(f"daily peaks differ: DuckDB {duck_days}, Spark {spark_days}")
    duck_calls = {b: c for b, c, _, _ in duck["totals"]}
    spark_calls = {t["broker"]: t["count"] for t in spark["latency_totals"]}
    if duck_calls != spark_calls:
        problems.append("send calls per broker differ")
    duck_spikes = {b: n for b, n, _ in duck["spikes"]}
    spark_spikes = {s["broker"]: s["spike_seconds"] for s in spark["spikes"]}
    if duck_spikes != spark_spikes:
        problems.append(f"spike seconds differ: DuckDB {duck_spikes}, Spark {spark_spikes}")
    if len(duck["buckets"]) != len(spark["latency_buckets"]):
        problems.append("merged bucket rows differ")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", type=int, default=20)
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=3, help="median of this many runs (default 3)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--data", help="keep the generated log here (reused when present)")
    a = ap.parse_args()

    from spark_reports.generator import Double11Config, generate_double11
    from spark_reports.session import get_session

    work = Path(tempfile.mkdtemp(prefix="bench-spark-capacity-"))
    log = Path(a.data) if a.data else work / "log"
    try:
        if not (log / "latency").exists():
            cfg = Double11Config(brokers=a.brokers, hours=a.hours, ops=("send", "pull"),
                                 start=datetime(2026, 11, 10, 22, tzinfo=UTC))  # fmt: skip
            gen = generate_double11(cfg, log)
            print(f"generated {a.brokers} brokers x {a.hours:g} h: {gen.latency_rows:,} latency rows "
                  f"in {gen.seconds:.1f} s")  # fmt: skip
        t0 = time.perf_counter()
        spark = get_session(a.master, "bench-spark-capacity", progress=False)
        print(f"Spark session start ({a.master}): {time.perf_counter() - t0:.1f} s (not counted below)")
        duck_s, duck_rss, duck = timed(lambda: run_duckdb(log), a.runs)
        spark_s, spark_rss, figures = timed(lambda: run_spark(spark, log), a.runs)
        spark.stop()
        problems = agree(duck, figures)
        for p in problems:
            print(f"MISMATCH: {p}")
        rows = sum(b["seconds"] for b in figures["brokers"])
        print(f"send rows (broker-seconds): {rows:,}; figures agree: {not problems}")
        print(f"DuckDB (2 threads) capacity figures: {duck_s:.2f} s, {rows / duck_s:,.0f} rows/s, "
              f"peak RSS {duck_rss:.0f} MiB")  # fmt: skip
        print(f"Spark {a.master} collect_measured:   {spark_s:.2f} s, {rows / spark_s:,.0f} rows/s, "
              f"peak RSS {spark_rss:.0f} MiB")  # fmt: skip
        ratio = spark_s / duck_s
        print(f"Spark / DuckDB: {ratio:.2f}x (goal <= {GOAL_RATIO:g}x)")
        return 0 if ratio <= GOAL_RATIO and not problems else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
