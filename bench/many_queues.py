"""One broker, many queues (the Taobao talk: the CommitLog lets one host carry tens of
thousands of queues): sync sends spread over `--topics` topics (4 queues each)
against the same sends to one topic, in alternated rounds, in one run.

Reports per mode the median send rate; then, with every queue written, the
broker's open descriptors, its peak RSS, the store's disk beyond the CommitLog
per queue, and the recovery after a SIGKILL (the broker's own recovery time and
the time until it answers /healthz).

    .venv/bin/python bench/many_queues.py [--topics 2500] [--rounds 3] [--sends 5000]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import peak_rss_mib, print_figures  # noqa: E402

from broker_core.client.producer import Producer  # noqa: E402
from broker_core.cluster.health import wait_healthy  # noqa: E402
from broker_core.cluster.launcher import Cluster  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402


def proc_status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def disk_bytes(root: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())


def rate(producer: Producer, topics: list[str], sends: int) -> float:
    body = b"m" * 128
    t0 = time.perf_counter()
    for i in range(sends):
        producer.send(topics[i % len(topics)], body)
    return sends / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=2500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sends", type=int, default=5000)
    ap.add_argument("--max-mapped", type=int, default=None,
                    help="the broker's --max-mapped-queues (its default if not given)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    many = [f"t{i}" for i in range(args.topics)]
    with tempfile.TemporaryDirectory(prefix="floodgate-many-queues-") as tmp:
        extra = [] if args.max_mapped is None else ["--max-mapped-queues", str(args.max_mapped)]
        cluster = Cluster(1, free_port_range(2), Path(tmp) / "c", flush="async",
                          extra_args=extra)
        cluster.up()
        entry = cluster.file.brokers[0]
        try:
            rates: dict[str, list[float]] = {"one topic": [], f"{args.topics} topics": []}
            with Producer(cluster.file.addrs, fuse=False, timeout=10) as producer:
                rate(producer, many, 4 * len(many))  # every queue made (round robin per topic)
                for _ in range(args.rounds):
                    rates["one topic"].append(rate(producer, ["one"], args.sends))
                    rates[f"{args.topics} topics"].append(rate(producer, many, args.sends))
            pid = cluster.procs[entry.name].pid
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            rss_mib = proc_status(pid, "VmHWM") / 1024
            store = Path(tmp) / "c" / entry.name / "store"
            queues = sum(1 for _ in (store / "consumequeue").glob("*/*"))
            beyond = disk_bytes(store) - disk_bytes(store / "commitlog")
            cluster.procs[entry.name].send_signal(signal.SIGKILL)
            cluster.procs[entry.name].wait(10)
            t0 = time.monotonic()
            cluster.start_broker(entry)
            wait_healthy(entry.http, 120, cluster.procs[entry.name])
            back_s = time.monotonic() - t0
        finally:
            cluster.down()
        log = (Path(tmp) / "c" / "logs" / f"{entry.name}.log").read_text()
    recovery = [line for line in log.splitlines() if "'crashed': True" in line]
    recovered_s = float(recovery[-1].split("'seconds': ")[1].split(",")[0]) if recovery else None
    out = {
        "rates": {k: round(statistics.median(v)) for k, v in rates.items()},
        "ratio": round(statistics.median(rates[f"{args.topics} topics"])
                       / statistics.median(rates["one topic"]), 3),
        "queues": queues, "broker_fds": fds, "broker_peak_rss_mib": round(rss_mib),
        "disk_beyond_commitlog_kib_per_queue": round(beyond / max(1, queues) / 1024, 1),
        "recovery_s": recovered_s, "back_after_kill_s": round(back_s, 2),
        "bench_peak_rss_mib": round(peak_rss_mib()),
    }
    print_figures(out, args.json, 40)
    return 0


if __name__ == "__main__":
    sys.exit(main())
