"""The fuse in a live cluster: `floodgate demo --headless N --json --with-tui`.

Six brokers, a producer at 5,000 msgs/s and the console (headless, stepping
through its screens) share this machine's cores, as in `make demo`. Goals
(issue 14): no isolation of a fault-free broker; every stall isolated within
1 s of its start. The peer in the same run is the brokers' own view: their
send p99/max beside what the producer's fuse had to see through (its own
lateness, calls excused).

    .venv/bin/python bench/fuse_live.py [--seconds 300] [--rate 5000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_base(count: int = 13) -> int:
    for _ in range(200):
        base = random.randrange(24000, 39000, 2)
        ok = True
        for port in range(base, base + count):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise SystemExit("no free port range")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--rate", type=float, default=5000.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    floodgate = Path(sys.executable).with_name("floodgate")
    cmd = [str(floodgate), "demo", "--headless", f"{args.seconds:g}", "--json", "--with-tui",
           "--rate", f"{args.rate:g}", "--base-port", str(free_base())]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                          timeout=args.seconds + 180)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        return 1
    run = json.loads(proc.stdout)
    stalls = run["stall_detection"]
    missed = []
    if run["false_isolations"]:
        missed.append(f"{run['false_isolations']} isolation(s) of fault-free brokers")
    late = [s for s in stalls if not s["within_goal"] and not s["open"]]
    if late:
        missed.append(f"{len(late)} of {len(stalls)} stalls isolated after more than 1 s")
    client = run["client_lateness"] or {}
    healthy = [b for b in run["brokers"] if not b["faulted"]]
    figures = {
        "seconds": args.seconds, "load_average_before": load, "wall_s": wall,
        "acked": run["acked"], "msgs_per_s": run["acked"] / args.seconds,
        "false_isolations": run["false_isolations"],
        "false_isolation_events": [
            {"at_s": round(e["time"] - run["faults"][0]["time"] + 6.0, 2), "broker": e["broker"],
             "reason": e["reason"]} for e in run["false_isolation_events"]],
        "stall_delays_ms": [None if s["delay_s"] is None else round(s["delay_s"] * 1000, 1)
                            for s in stalls],
        "client_away_s": client.get("away_total_s"), "client_worst_gap_ms":
            None if client.get("worst_s") is None else round(client["worst_s"] * 1000, 1),
        "client_late_beats": client.get("late_beats"), "client_beats": client.get("beats"),
        "excused": run["excused"],
        "healthy_brokers_last_10s": [
            {"name": b["name"], "p99_ms": b["p99_s"] and round(b["p99_s"] * 1000, 3),
             "max_ms": b["max_s"] and round(b["max_s"] * 1000, 2)} for b in healthy],
        "goals_missed": missed,
    }
    if args.json:
        json.dump(figures, sys.stdout, indent=2)
        print()
    else:
        print(f"{args.seconds:g} s demo with the console in-process, {figures['msgs_per_s']:,.0f} "
              f"msgs/s acked, load average before {load:.2f}")
        print(f"  isolations of fault-free brokers: {run['false_isolations']} "
              f"{figures['false_isolation_events'] or ''}")
        print(f"  stalls: {len(stalls)}, isolated after (ms): {figures['stall_delays_ms']}")
        print(f"  producer away (its own lateness): {client.get('away_total_s', 0):.1f} s, "
              f"worst gap {figures['client_worst_gap_ms']} ms, "
              f"{client.get('late_beats')} late of {client.get('beats')} beats")
        print(f"  calls excused: {run['excused']}")
        for b in figures["healthy_brokers_last_10s"]:
            print(f"  {b['name']}: broker-side send p99 {b['p99_ms']} ms, max {b['max_ms']} ms "
                  f"(last 10 s)")
        print("goals: " + ("all met" if not missed else "; ".join(missed)))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
