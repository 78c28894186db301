"""Reports through a warm Spark Connect server against cold local runs and DuckDB, one run.

    .venv/bin/python bench/spark_connect.py                       # 20 brokers x 2 h, generated
    .venv/bin/python bench/spark_connect.py --data /tmp/d11day --brokers 100 --hours 24

Generates the log with `floodgate gen double11` when --data has none, starts a
server with `floodgate spark up` (its start and warm-up timed), then for each
report runs `floodgate report ...` as a user would: once cold (local[*], the
JVM's start counted), then --runs rounds of one run through `--remote` and one of
DuckDB (2 threads) on the same files (spark_day.py's peer): the ratio is of the two
medians, the first warm run (the first after `spark up`) shown apart. Peak RSS beside
each: the client's process tree, and the server's JVM (not in the client's tree). Goals (issue 31): the 100-broker day's heatmap
through the server <= 3x DuckDB; the 20-broker x 2 h report <= 10 s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402
from spark_day import FLOODGATE, _duckdb, run_tree  # noqa: E402

GOAL_RATIO = 3.0
GOAL_SMALL_S = 10.0


class ServerRss:
    """Peak RSS of the Connect server's process group (the JVM), sampled every 200 ms."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                root = psutil.Process(self.pid)
                total = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
                self.peak = max(self.peak, total)
            except psutil.Error:
                pass
            self._stop.wait(0.2)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def report_cmd(report: str, log: Path, out: Path, *spark: str) -> list[str]:
    cmd = [*FLOODGATE, "report", report, "--input", str(log), "--out", str(out), "--json",
           "--force", *spark]  # fmt: skip
    return cmd + (["--target-date", "2027-11-11"] if report == "capacity" else [])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None,
                    help="the log (generated here when absent; default: a temporary one)")
    ap.add_argument("--brokers", type=int, default=20)
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--reports", default="heatmap,capacity")
    ap.add_argument("--runs", type=int, default=5, help="rounds (a warm run and a DuckDB run) per report")
    ap.add_argument("--port", type=int, default=15123)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per report run")
    ap.add_argument("--no-cold", dest="cold", action="store_false", help="skip the local runs")
    ap.add_argument("--no-duckdb", dest="duckdb", action="store_false", help="skip the peer")
    ap.add_argument("--driver-memory", default=None, help="the server's heap (spark up's)")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-spark-connect-"))
    log = Path(a.data) if a.data else work / "log"
    small = a.brokers <= 20 and a.hours <= 2
    failed = False
    sc = ["--port", str(a.port), "--dir", str(work / "server")]
    try:
        if not (log / "latency").exists():
            wall, rss, _, code, tail = run_tree([*FLOODGATE, "gen", "double11", "--brokers",
                                              str(a.brokers), "--hours", str(a.hours), "--out",
                                              str(log), "--json"], a.timeout)  # fmt: skip
            print(f"gen double11 {a.brokers} x {a.hours:g} h: {wall:.1f} s, peak RSS {rss:.0f} MiB")
        size = sum(f.stat().st_size for f in log.rglob("*.parquet"))
        print(f"log {log}: {size / 2**30:.2f} GiB of Parquet")
        memory = ["--driver-memory", a.driver_memory] if a.driver_memory else []
        wall, rss, _, code, tail = run_tree([*FLOODGATE, "spark", "up", *sc, *memory, "--json"], 300)
        if code != 0:
            print(f"spark up failed: {tail}")
            return 1
        state = json.loads((work / "server" / "state.json").read_text())
        print(f"floodgate spark up (start + warm-up query): {wall:.1f} s")
        url = f"sc://localhost:{a.port}"
        for report in a.reports.split(","):
            out = work / report
            cold_s = float("nan")
            if a.cold:
                cold_s, cold_rss, _, code, tail = run_tree(report_cmd(report, log, out), a.timeout)
                print(f"{report} cold (local[*], JVM start counted): {cold_s:.1f} s, peak RSS "
                      f"{cold_rss:.0f} MiB, exit {code}")  # fmt: skip
            # Rounds of one warm run and one DuckDB run: on this shared host the two
            # see the same weather, and the ratio is of the two medians.
            warm, duck, client, duck_rss = [], [], 0.0, 0.0
            with ServerRss(state["server_pid"]) as server:
                for _ in range(a.runs):
                    s, rss, _, code, tail = run_tree(report_cmd(report, log, out, "--remote", url),
                                                  a.timeout)  # fmt: skip
                    if code not in (0, 1):
                        print(f"  warm run failed: {tail}")
                        failed = True
                    warm.append(s)
                    client = max(client, rss)
                    if a.duckdb:
                        d, d_rss = _duckdb(report, log, work)
                        duck.append(d)
                        duck_rss = max(duck_rss, d_rss)
            median = statistics.median(warm)
            print(f"{report} through Connect: runs {', '.join(f'{s:.1f}' for s in warm)} s (the "
                  f"first after `spark up`: {warm[0]:.1f} s), median {median:.1f} s; client peak "
                  f"RSS {client:.0f} MiB, server {server.peak / 2**20:.0f} MiB")  # fmt: skip
            if not a.duckdb:
                continue
            duck_s = statistics.median(duck)
            ratio = median / duck_s
            print(f"DuckDB (2 threads) {report}: runs {', '.join(f'{s:.1f}' for s in duck)} s, "
                  f"median {duck_s:.1f} s, peak RSS {duck_rss:.0f} MiB")  # fmt: skip
            print(f"  {report}: warm / DuckDB {ratio:.2f}x (rounds: "
                  f"{', '.join(f'{w / d:.2f}' for w, d in zip(warm, duck, strict=True))}; goal "
                  f"<= {GOAL_RATIO:g}x for the day's heatmap), cold / warm {cold_s / median:.1f}x")  # fmt: skip
            if report == "heatmap":
                failed |= median > GOAL_SMALL_S if small else ratio > GOAL_RATIO
    finally:
        subprocess.run([*FLOODGATE, "spark", "down", *sc], capture_output=True, timeout=120)
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    code = main()
    print(json.dumps({"exit": code}))
    sys.exit(code)
