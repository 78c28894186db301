"""The full-size night through the real commands, against DuckDB on the same files.

    .venv/bin/python bench/spark_day.py --data /tmp/d11day             # 100 brokers x 24 h
    .venv/bin/python bench/spark_day.py --data /tmp/d11 --brokers 20 --hours 4

Generates the log with `floodgate gen double11` when --data has none (timed),
then runs `floodgate report heatmap` and `floodgate report capacity` over the
whole log as a user would (subprocesses: the JVM's start is counted), each
followed by DuckDB (2 threads) computing the same figures from the same
Parquet (the other benches' SQL). Prints wall time and peak RSS of the process
tree (JVM included) for every run, the ratio, and the report's HTML size.
Goals (issue 19): each report <= 90 s, Spark <= 3x DuckDB, HTML <= 15 MB.
One run each: the full day holds the shared machine for minutes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402

GOAL_WALL_S = 90.0
GOAL_RATIO = 3.0
GOAL_HTML_MB = 15.0
FLOODGATE = [sys.executable, "-m", "console.cli"]


def run_tree(cmd: list[str], timeout_s: float) -> tuple[float, float, float, int, str]:
    """(wall s, peak RSS MiB of the process tree, of its first process, exit code, stderr
    tail) of a command. The first process of a report is its Python driver (the figures
    it holds: issue 31's bound), the rest the JVM it started."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = peak_root = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak, peak_root
        root = psutil.Process(proc.pid)
        while not stop.is_set():
            total = 0
            try:
                for p in [root, *root.children(recursive=True)]:
                    try:
                        rss = p.memory_info().rss
                    except psutil.Error:
                        continue
                    total += rss
                    if p is root:
                        peak_root = max(peak_root, rss)
            except psutil.Error:
                pass
            peak = max(peak, total)
            stop.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        stop.set()
        return (time.perf_counter() - t0, peak / 2**20, peak_root / 2**20, -1,
                f"timed out after {timeout_s:g} s")
    stop.set()
    sampler.join()
    tail = (err or "").strip().splitlines()[-1:] or (out or "").strip().splitlines()[-1:]
    return time.perf_counter() - t0, peak / 2**20, peak_root / 2**20, proc.returncode, " ".join(tail)


def in_process(fn):
    from spark_heatmap import timed

    seconds, rss, result = timed(fn, 1)
    return seconds, rss, result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="the log (generated here when absent)")
    ap.add_argument("--brokers", type=int, default=100)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--reports", default="heatmap,capacity")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per report run")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--engines", default="spark,duckdb", help="spark, duckdb or both")
    a = ap.parse_args()
    log = Path(a.data)
    work = Path(tempfile.mkdtemp(prefix="bench-spark-day-"))
    failed = False
    try:
        if not (log / "latency").exists():
            cmd = [*FLOODGATE, "gen", "double11", "--brokers", str(a.brokers), "--hours",
                   str(a.hours), "--out", str(log), "--json"]  # fmt: skip
            wall, rss, _, code, tail = run_tree(cmd, a.timeout)
            print(f"gen double11 {a.brokers} x {a.hours:g} h: {wall:.1f} s, peak RSS {rss:.0f} MiB"
                  f" (exit {code}) {tail}")  # fmt: skip
        size = sum(f.stat().st_size for f in log.rglob("*.parquet"))
        print(f"log {log}: {size / 2**30:.2f} GiB of Parquet; tables "
              f"{sorted(p.name for p in log.iterdir() if p.is_dir())}")  # fmt: skip
        engines = set(a.engines.split(","))
        for report in a.reports.split(","):
            if "spark" not in engines:
                duck_s, duck_rss = _duckdb(report, log, work)
                print(f"DuckDB (2 threads) {report} figures: {duck_s:.1f} s, peak RSS {duck_rss:.0f} MiB")
                continue
            out = work / report
            cmd = [*FLOODGATE, "report", report, "--input", str(log), "--out", str(out),
                   "--master", a.master, "--json", "--force"]  # a kept work dir: again  # fmt: skip
            if report == "capacity":
                cmd += ["--target-date", "2027-11-11"]
            wall, rss, driver, code, tail = run_tree(cmd, a.timeout)
            html = out / "report.html"
            ok = code in (0, 1) and html.exists()  # 1: a FAIL verdict, outputs written (both reports)
            mb = html.stat().st_size / 1e6 if html.exists() else float("nan")
            print(f"floodgate report {report}: {wall:.1f} s, peak RSS {rss:.0f} MiB (its Python "
                  f"driver {driver:.0f} MiB), exit {code}"
                  f", report.html {mb:.2f} MB{'' if ok else ' FAILED: ' + tail}")  # fmt: skip
            duck_s, duck_rss = _duckdb(report, log, work)
            print(f"DuckDB (2 threads) {report} figures: {duck_s:.1f} s, peak RSS {duck_rss:.0f} MiB")
            ratio = wall / duck_s
            print(f"  {report}: Spark / DuckDB {ratio:.2f}x (goal <= {GOAL_RATIO:g}x); "
                  f"wall goal <= {GOAL_WALL_S:g} s; HTML goal <= {GOAL_HTML_MB:g} MB")  # fmt: skip
            failed |= not ok or wall > GOAL_WALL_S or ratio > GOAL_RATIO or not mb <= GOAL_HTML_MB
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


def _duckdb(report: str, log: Path, work: Path) -> tuple[float, float]:
    if report == "heatmap":
        import spark_heatmap

        from spark_reports.heatmap_report.frames import choose_window_s

        window = choose_window_s(_span_s(log))
        # the table the job reads for this window: the minute rollups when the log has them
        table = "latency_1m" if window % 60 == 0 and (log / "latency_1m").exists() else "latency"
        seconds, rss, _ = in_process(
            lambda: spark_heatmap.run_duckdb(log, work / "duck", window, table)
        )
        print(f"  (DuckDB read {table})")
    else:
        import spark_capacity

        seconds, rss, _ = in_process(lambda: spark_capacity.run_duckdb(log))
    return seconds, rss


def _span_s(log: Path) -> float:
    import duckdb

    con = duckdb.connect()
    first, last = con.execute(
        f"SELECT epoch(min(ts)), epoch(max(ts)) FROM read_parquet('{log}/latency/*/*.parquet')"
    ).fetchone()
    con.close()
    return float(last - first + 1)


if __name__ == "__main__":
    code = main()
    print(json.dumps({"exit": code}))
    sys.exit(code)
