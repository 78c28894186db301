"""A replica replaced under load, as an operator does it (issue 62): a raft group of three
holding `--fill-mb` of messages, a paced load of `--rate` msgs/s running, then
`floodgate cluster add-replica` (the new member fed the leader's log from its first
byte) and `cluster remove-replica` of an old follower. Reported: the store
copied and how long the change took, the load's send latency and failures across it,
every peak RSS. No ratio goal of the issue's; the load's health is the bar: sends
p99 <= 5 ms and max <= 20 ms, 0 failed, while the store is copied.

    .venv/bin/python bench/raft_add_replica.py [--fill-mb 100] [--rate 2000] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._util import peak_rss_mib, print_figures  # noqa: E402
from broker_core.cluster.cluster_file import load_cluster  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402
from broker_core.cluster.roles import broker_role  # noqa: E402

CLI = [sys.executable, "-m", "console.cli"]


def floodgate(*args: str) -> str:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise SystemExit(f"floodgate {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def vm_hwm_mib(pid: int) -> float:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    found = re.search(r"VmHWM:\s+(\d+) kB", text)
    return int(found.group(1)) / 1024 if found else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fill-mb", type=int, default=100)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fg-add-replica-") as tmp:
        data = Path(tmp) / "c"
        up = subprocess.Popen([*CLI, "cluster", "up", "--groups", "1", "--replicas", "3",
                               "--consensus", "raft", "--data", str(data), "--base-port",
                               str(free_port_range(40)), "--name", "add-replica"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        path = data / "cluster.toml"
        try:
            deadline = time.monotonic() + 90
            while not (path.exists() and load_cluster(path).supervisor_pid == up.pid):
                if up.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("cluster up did not come up")
                time.sleep(0.2)
            floodgate("bench", "produce", "--cluster", str(path), "--count",
                      str(args.fill_mb * 1000), "--size", "1000", "--concurrency", "64",
                      "--topic", "fill")
            load = subprocess.Popen([*CLI, "bench", "produce", "--cluster", str(path),
                                     "--duration", "20", "--rate", str(args.rate), "--size",
                                     "1024", "--concurrency", "16", "--topic", "live",
                                     "--json"], stdout=subprocess.PIPE, text=True)
            time.sleep(3)
            added = json.loads(floodgate("cluster", "add-replica", "--cluster", str(path),
                                         "--group", "group-1", "--json"))
            spec = load_cluster(path)
            roles = {b.name: broker_role(b.addr) for b in spec.brokers}
            leader = next(n for n, r in roles.items() if r.get("role") == "MASTER")
            victim = next(n for n in sorted(roles) if n not in (leader, "group-1-d"))
            t0 = time.monotonic()
            floodgate("cluster", "remove-replica", "--cluster", str(path), "--group",
                      "group-1", "--member", victim)
            removed_s = time.monotonic() - t0
            rss = {n: vm_hwm_mib(int(r.get("pid") or 0)) for n, r in roles.items()}
            live = json.loads(load.communicate(timeout=60)[0])
        finally:
            up.send_signal(signal.SIGTERM)
            up.wait(60)
    rt = {k: round(live[f"{k}_s"] * 1000, 2) for k in ("p99", "max")
          if live.get(f"{k}_s") is not None}
    out = {"store_copied_mb": round(added["snapshot_bytes"] / 1e6, 1),
           "add_took_s": added["took_s"], "remove_took_s": round(removed_s, 2),
           "load": {"rate": args.rate, "acked": live.get("acked"),
                    "errors": live.get("errors"), "p99_ms": rt.get("p99"),
                    "max_ms": rt.get("max")},
           "broker_peak_rss_mib": rss, "bench_peak_rss_mib": round(peak_rss_mib(), 1)}
    out["healthy"] = bool(live.get("errors") == 0 and (rt.get("p99") or 99) <= 5
                          and (rt.get("max") or 99) <= 20)
    print_figures(out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
