"""Shared helpers for bench scripts: repeated timing and peak RSS."""

from __future__ import annotations

import resource
import statistics
import sys
import time
from collections.abc import Callable


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB (Linux: KiB units)."""
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib / 1024 if sys.platform != "darwin" else kib / 2**20


def print_figures(out: dict, as_json: bool, width: int = 28) -> None:
    """A bench's figures: JSON, or one `name value` line each."""
    if as_json:
        import json

        print(json.dumps(out, indent=2))
        return
    for k, v in out.items():
        print(f"{k:{width}} {v}")


def median_seconds(fn: Callable[[], object], repeat: int = 5) -> float:
    """Median wall time of ``repeat`` runs of ``fn`` (after one warm-up run)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cluster_peak_rss_mib(cluster) -> float:
    """The largest peak RSS (VmHWM) among a launcher.Cluster's broker processes, in MiB."""
    from pathlib import Path

    peak = 0.0
    for proc in cluster.procs.values():
        try:
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) / 1024)
        except OSError:
            pass
    return round(peak, 1)
