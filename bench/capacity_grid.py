"""The Taobao talk's MetaQ 2.0 capacity grid on this host (`floodgate capacity measure
--quick`), judged against the talk's published table per core, and its backlog test
(`floodgate capacity backlog`, root) with `--backlog`.

Goals (issue 64): every cell in <= 15 minutes; per core, each cell's knee >= 2x MetaQ
2.0's send TPS (16 cores) at a send p99 within 20 ms; backlog: the producer's send p99
<= 20 ms while consumers read >= 100 MB/s, under the scheduler `tune plan` recommends.

    .venv/bin/python bench/capacity_grid.py [--backlog] [--backlog-gib N] [--out DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import peak_rss_mib  # noqa: E402

FLOODGATE = [sys.executable, "-m", "console.cli"]
GRID_S = 15 * 60
PER_CORE = 2.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--backlog", action="store_true", help="the backlog test too (root)")
    ap.add_argument("--backlog-gib", default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="floodgate-capacity-grid-"))
    t0 = time.monotonic()
    subprocess.run([*FLOODGATE, "capacity", "measure", "--quick", "--out", str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    took = time.monotonic() - t0
    doc = json.loads((out / "cells.json").read_text())
    cells = [{"cell": c["label"], "knee_tps": (c["knee"] or {}).get("send_tps"),
              "p99_ms": (c["knee"] or {}).get("p99_ms"),
              "per_core_vs_metaq2": c.get("per_core_vs_metaq2"),
              "broker_peak_rss_mib": max((s["peak_rss_mib"] for s in c["steps"]), default=None),
              "stopped": c["stopped"]} for c in doc["cells"]]
    result = {"grid_seconds": round(took), "cells": cells,
              "grid_met": took <= GRID_S and all((c["per_core_vs_metaq2"] or 0) >= PER_CORE
                                                 for c in cells)}
    if args.backlog:
        extra = ["--backlog-gib", args.backlog_gib] if args.backlog_gib else []
        subprocess.run([*FLOODGATE, "capacity", "backlog", "--out", str(out), *extra],
                       check=True, stdout=subprocess.DEVNULL)
        bl = json.loads((out / "backlog.json").read_text())
        best = next(r for r in bl["runs"] if r["scheduler"] == bl["best"])
        result["backlog"] = bl
        result["backlog_met"] = best["send_p99_ms"] <= 20 and best["consume_mb_s"] >= 100
    result["bench_peak_rss_mib"] = round(peak_rss_mib())
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"grid: {took / 60:.1f} min (goal <= 15), page {out}/capacity-measure.html")
        for c in cells:
            print(f"  {c['cell']:<22} knee {c['knee_tps'] or 0:>8,.0f} msgs/s p99 "
                  f"{c['p99_ms'] or 0:5.1f} ms, per core x{c['per_core_vs_metaq2']} MetaQ 2.0 "
                  f"(goal >= {PER_CORE:g}); broker peak RSS {c['broker_peak_rss_mib']:.0f} MiB")
        for r in result.get("backlog", {}).get("runs", []):
            print(f"  backlog {r['scheduler']:<12} send p99 {r['send_p99_ms']} ms, consumers "
                  f"{r['consume_mb_s']} MB/s ({r['disk_read_mb_s']} from disk)")
        print(f"  bench peak RSS {result['bench_peak_rss_mib']} MiB (its children's included)")
    return 0 if result["grid_met"] and result.get("backlog_met", True) else 1


if __name__ == "__main__":
    sys.exit(main())
