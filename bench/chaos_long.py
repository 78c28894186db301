"""The long chaos run (issue 28): `drill chaos` for 30 minutes with every fault kind.

A cluster of `--groups` sync-replicated groups (4 by default, so that the fuse's
30 % cap lets it isolate one) on namespaced hosts with `--restart`, then `floodgate
drill chaos` with partition, isolate, kill, pause, loss and delay; the report's
figures against the goals:

- 0 acknowledged messages lost, 0 split-brain acks, over >= 100 faults;
- unavailability per failover (a group's first failed send -> its next ack), median
  <= ZooKeeper session (1 s) + 1 s;
- the fuse isolates a lossy (5 %) or slow (30 ms) master within 1 s, and never a
  group no fault touched;
- the exactly-once pipeline (the topic transformed into `<topic>-out` under the same
  faults): 0 lost, 0 duplicated, 0 reads of aborted transactions, 0 out of order.

Peak RSS of the cluster's processes is read from /proc while it runs.

    .venv/bin/python bench/chaos_long.py [--duration 1800] [--groups 4] [--seed 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._util import peak_rss_mib, print_figures  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--duration", type=float, default=1800.0)
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--keep", type=Path, help="copy the history, report and broker logs here")
    ap.add_argument("--consensus", choices=("controller", "raft"), default="controller",
                    help="raft: groups of 3 that elect their leaders (no ZooKeeper)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    replicas = 3 if args.consensus == "raft" else 2
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        data = Path(tmp) / "c"
        cluster = subprocess.Popen(
            [sys.executable, "-m", "console.cli", "cluster", "up", "--groups", str(args.groups),
             "--replicas", str(replicas), "--consensus", args.consensus,
             "--netns", "--restart", "--segment-size", "64M", "--data", str(data),
             "--base-port", str(free_port_range(3 * replicas * args.groups + 1))],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
        peak = [0.0]
        stop = threading.Event()

        def sample() -> None:  # the cluster's processes: brokers, ZooKeeper, controller
            while not stop.wait(1.0):
                pids = subprocess.run(["pgrep", "-f", str(data)], capture_output=True,
                                      text=True).stdout.split()
                peak[0] = max(peak[0], sum(rss_mib(int(p)) for p in pids))

        try:
            for line in cluster.stdout:
                if "stops them all" in line:
                    break
            threading.Thread(target=sample, daemon=True).start()
            history = data / "history.jsonl"
            began = time.monotonic()
            run = subprocess.run(
                [sys.executable, "-m", "console.cli", "drill", "chaos", "--cluster",
                 str(data / "cluster.toml"), "--duration", str(args.duration), "--seed",
                 str(args.seed), "--rate", str(args.rate), "--history", str(history),
                 "--json"], capture_output=True, text=True, cwd=ROOT)
            took = time.monotonic() - began
        finally:
            stop.set()
            cluster.send_signal(signal.SIGTERM)
            cluster.wait(120)
        if not run.stdout:
            sys.exit(f"drill chaos printed no report: {run.stderr[-2000:]}")
        r = json.loads(run.stdout)
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for f in (history, history.with_suffix(".report.json")):
                if f.exists():
                    (args.keep / f.name).write_bytes(f.read_bytes())
            if (data / "logs").is_dir():  # the brokers' own words, for what the history shows
                shutil.copytree(data / "logs", args.keep / "logs", dirs_exist_ok=True)
    kinds: dict[str, int] = {}
    for f in r["faults"]:
        kinds[f["fault"]["kind"]] = kinds.get(f["fault"]["kind"], 0) + 1
    windows = [w["seconds"] for w in r["unavailable"] if w["seconds"] is not None]
    detect = [f.get("fuse_detect_s") for f in r["faults"]
              if f["fault"]["kind"] in ("loss", "delay")]
    seen = [d for d in detect if d is not None]
    out = {
        "duration_s": args.duration, "groups": args.groups, "consensus": args.consensus,
        "seed": args.seed,
        "wall_s": round(took, 1), "faults": len(r["faults"]), "faults_by_kind": kinds,
        "sends": r["sends"], "acked": r["acked"], "failed": r["failed"],
        "lost": r["lost"], "split_brain_acks": r["split_brain_acks"],
        "duplicates_stored": r["duplicates_stored"],
        "duplicates_delivered": r["duplicates_delivered"],
        "failovers": len(r["failovers"]),
        "failover_unavailable_median_s": (round(statistics.median(per), 3) if (per := [
            fo["unavailable_s"] for fo in r["failovers"] if fo["unavailable_s"] is not None])
            else None),
        "failover_unavailable_max_s": max(per, default=None),
        "unavailable_windows": len(windows),
        "unavailable_median_s": round(statistics.median(windows), 3) if windows else 0.0,
        "unavailable_max_s": max(windows, default=0.0),
        "never_available_again": sum(1 for w in r["unavailable"] if w["seconds"] is None),
        "fuse_isolations": len(r["fuse_isolations"]),
        "fuse_unjustified": r["fuse_unjustified"],
        "fuse_detected": f"{len(seen)} of {len(detect)}",
        "fuse_detect_within_1s": sum(1 for d in seen if d <= 1.0),
        "fuse_detect_max_s": max(seen, default=None),
        "cluster_peak_rss_mib": round(peak[0]),
        "bench_peak_rss_mib": peak_rss_mib(),
        # the exactly-once pipeline under the same faults (cluster.chaos_pipeline)
        **{f"pipeline_{k}": v for k, v in (r.get("pipeline") or {}).items() if k != "samples"},
        # compare-and-sets on one queue's end (cluster.chaos_register), linearizable or not
        **{f"register_{k}": v for k, v in (r.get("register") or {}).items()},
        "drill_exit": run.returncode,
    }
    print_figures(out, args.json)


if __name__ == "__main__":
    main()
