"""What a console poll of a TLS broker costs: a connection per poll (urllib, as the
console did) against one kept connection per broker (console/data/kept_http.py), in
the same run against the same broker.

One broker with `--tls` (what `make demo` runs); `--polls` GETs of
`/stats?history=3` (the console's steady poll) per round, rounds alternating between
the two ways; per poll: the client's wall time and the broker's CPU (user + system
from /proc). Medians of the rounds.

    .venv/bin/python bench/console_poll.py [--polls 200] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import cluster_peak_rss_mib, peak_rss_mib  # noqa: E402
from proc_figures import cpu_seconds  # noqa: E402

from broker_core.acl import tls  # noqa: E402
from broker_core.cluster.launcher import Cluster  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402
from console.data.kept_http import KeptConnections  # noqa: E402

PATH = "/stats?history=3"


def per_poll(addr: str, pid: int, polls: int, kept: bool) -> tuple[float, float]:
    """(client ms a poll, broker CPU ms a poll)."""
    http = KeptConnections(timeout=5, broker=True)
    url, ctx = tls.broker_http(addr, PATH)
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    for _ in range(polls):
        if kept:
            doc, error = http.get(addr, PATH)
            assert doc is not None, error
        else:
            with urllib.request.urlopen(url, timeout=5, context=ctx) as r:
                r.read()
    wall, cpu = time.perf_counter() - t0, cpu_seconds(pid) - cpu0
    http.close()
    return wall / polls * 1e3, cpu / polls * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--polls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-console-poll-") as tmp:
        cluster = Cluster(1, free_port_range(2), Path(tmp) / "c", segment_size="64M", tls=True)
        cluster.up()
        try:
            os.environ[tls.ENV_CA] = str(cluster.tls_ca)
            entry = cluster.file.brokers[0]
            pid = next(iter(cluster.procs.values())).pid
            got: dict[str, list[tuple[float, float]]] = {"per poll": [], "kept": []}
            for _ in range(a.rounds):
                for name in got:
                    got[name].append(per_poll(entry.http, pid, a.polls, name == "kept"))
            broker_rss = cluster_peak_rss_mib(cluster)
        finally:
            cluster.down()
    doc = {name: {"client_ms": round(statistics.median(r[0] for r in rows), 2),
                  "broker_cpu_ms": round(statistics.median(r[1] for r in rows), 3)}
           for name, rows in got.items()}  # fmt: skip
    doc["peak_rss_mib"] = {"bench": round(peak_rss_mib(), 1), "broker": broker_rss}
    if a.json:
        print(json.dumps(doc, indent=2))
        return 0
    for name in ("per poll", "kept"):
        d = doc[name]
        print(f"{name:>9}: {d['client_ms']:.2f} ms a poll, broker CPU {d['broker_cpu_ms']:.3f} ms")
    ratio = doc["per poll"]["broker_cpu_ms"] / max(doc["kept"]["broker_cpu_ms"], 1e-9)
    print(f"broker CPU: a connection per poll / kept = {ratio:.1f}x; peak RSS bench "
          f"{doc['peak_rss_mib']['bench']} MiB, broker {broker_rss} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
