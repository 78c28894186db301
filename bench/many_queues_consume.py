"""One broker, 10,000 queues, 100 consumers of one group: end-to-end delay (send ->
the consumer holds the message) at a paced 2,000 msgs/s, against the same 100
consumers on 100 queues (one each) in the same run. The Mogujie talk's echo consumer saw
10-15 ms; the goal is p99 <= 15 ms over the 10,000 queues.

Layout: `--topics` topics of `--queues` queues each (10 x 1,000 by default; a
consumer subscribes one topic, so a topic's queues are shared by `--consumers` /
`--topics` members); the consumers run as threads in `--procs` processes, the
paced producer in this one. Each message carries its send time (wall clock, one
host); a consumer records the delay of every message sent after the warm-up, into
a LatencyHistogram, and reports it with what it received (lost and duplicated
messages are counted).

    .venv/bin/python bench/many_queues_consume.py [--rate 2000] [--duration 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import peak_rss_mib  # noqa: E402
from proc_figures import cpu_seconds  # noqa: E402

from broker_core.client import admin  # noqa: E402
from broker_core.client.consumer import Consumer  # noqa: E402
from broker_core.client.producer import Producer  # noqa: E402
from broker_core.cluster.launcher import Cluster  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402
from heatmap import LatencyHistogram  # noqa: E402

STAMP = struct.Struct(">dQ")  # send time (epoch s), sequence number
GROUP = "bench-consume"


# -- the consumer processes -----------------------------------------------------------------
def consume(addr: str, topics: list[str], count: int, first: int, start_at: float,
            stop_at: float) -> dict:
    """`count` consumers (threads) of GROUP, consumer i on topics[(first + i) % n]."""
    hist, seen, dups, lock = LatencyHistogram(), set(), [0], threading.Lock()

    def run(i: int) -> None:
        topic = topics[(first + i) % len(topics)]
        with Consumer(GROUP, topic, {"b1": addr}, client_id=f"c{first + i}") as c:
            while time.time() < stop_at:
                got = c.poll(max_msgs=256, timeout=0.2)
                now = time.time()
                with lock:
                    for m in got:
                        sent, seq = STAMP.unpack_from(m.body)
                        if sent < start_at:
                            continue
                        if seq in seen:
                            dups[0] += 1
                        seen.add(seq)
                        hist.record(max(0.0, now - sent))
                if got:
                    c.commit()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"hist": hist.to_dict(), "seqs": sorted(seen), "dups": dups[0],
            "cpu_s": time.process_time(), "peak_rss_mib": peak_rss_mib()}


# -- the producer ---------------------------------------------------------------------------
def produce(addr: str, topics: list[str], rate: float, start_at: float, stop_at: float
            ) -> tuple[list[int], int]:
    """Paced sends until stop_at; the sequence numbers sent after start_at."""
    sent_after, errors, seq = [], 0, 0
    pad = b"x" * 100
    with Producer({"b1": addr}, fuse=False, timeout=5) as p:
        t0 = time.monotonic()
        while time.time() < stop_at:
            due = t0 + seq / rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            now = time.time()
            try:
                p.send(topics[seq % len(topics)], STAMP.pack(now, seq) + pad)
                if now >= start_at:
                    sent_after.append(seq)
            except Exception:  # noqa: BLE001 - counted: the bench says how many failed
                errors += 1
            seq += 1
    return sent_after, errors


def run_layout(args, topics: int, queues: int, label: str) -> dict:
    names = [f"{label}-{i}" for i in range(topics)]
    with tempfile.TemporaryDirectory(prefix="floodgate-consume-") as tmp:
        cluster = Cluster(1, free_port_range(2), Path(tmp) / "c", flush="async")
        cluster.up()
        entry = cluster.file.brokers[0]
        try:
            for name in names:
                admin.topic(entry.http, "POST", {"topic": name, "queues": queues}, timeout=60)
            settle = 10.0  # consumers join and the group's shares settle (heartbeats: 2 s)
            begin = time.time() + settle
            start_at, stop_at = begin + args.warmup, begin + args.warmup + args.duration
            per = args.consumers // args.procs
            procs = [subprocess.Popen(
                [sys.executable, __file__, "--role", "consumer", "--addr", entry.addr,
                 "--topic-names", ",".join(names), "--count", str(per), "--first",
                 str(k * per), "--start-at", repr(start_at), "--stop-at", repr(stop_at + 3)],
                stdout=subprocess.PIPE) for k in range(args.procs)]
            pid = cluster.procs[entry.name].pid
            while time.time() < begin:
                time.sleep(0.1)
            broker_cpu0 = cpu_seconds(pid)
            sent, errors = produce(entry.addr, names, args.rate, start_at, stop_at)
            broker_cpu = cpu_seconds(pid) - broker_cpu0
            outs = [json.loads(proc.communicate(timeout=120)[0]) for proc in procs]
            fds = len(os.listdir(f"/proc/{pid}/fd"))
        finally:
            cluster.down()
    hist = LatencyHistogram()
    got, dups, cpu, rss = set(), 0, 0.0, 0.0
    for out in outs:
        hist.merge(LatencyHistogram.from_dict(out["hist"]))
        got.update(out["seqs"])
        dups += out["dups"]
        cpu += out["cpu_s"]
        rss = max(rss, out["peak_rss_mib"])
    span = args.warmup + args.duration
    return {
        "queues": topics * queues, "consumers": per * args.procs,
        "sent": len(sent), "send_errors": errors, "received": len(got & set(sent)),
        "lost": len(set(sent) - got), "duplicates": dups,
        "delay_ms": {k: round(v * 1000, 2) if v is not None else None
                     for k, v in (("p50", hist.quantile(0.5)), ("p99", hist.quantile(0.99)),
                                  ("p999", hist.quantile(0.999)), ("max", hist.max))},
        "broker_cpu_cores": round(broker_cpu / span, 2),
        "consumer_procs_cpu_s": round(cpu, 1), "consumer_peak_rss_mib": round(rss),
        "broker_fds": fds,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--role", default="bench", choices=("bench", "consumer"))
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--queues", type=int, default=1000)
    ap.add_argument("--consumers", type=int, default=100)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--no-peer", action="store_true", help="skip the 100-queue run")
    ap.add_argument("--json", action="store_true")
    # the consumer processes' own arguments
    ap.add_argument("--addr")
    ap.add_argument("--topic-names")
    ap.add_argument("--count", type=int)
    ap.add_argument("--first", type=int)
    ap.add_argument("--start-at", type=float)
    ap.add_argument("--stop-at", type=float)
    args = ap.parse_args()
    if args.role == "consumer":
        print(json.dumps(consume(args.addr, args.topic_names.split(","), args.count,
                                 args.first, args.start_at, args.stop_at)))
        return 0
    out = {"many": run_layout(args, args.topics, args.queues, "many")}
    if not args.no_peer:  # one queue per consumer: the same consumers, few queues
        out["few"] = run_layout(args, args.topics, args.consumers // args.topics, "few")
        many, few = out["many"]["delay_ms"]["p99"], out["few"]["delay_ms"]["p99"]
        out["p99_ratio_many_to_few"] = round(many / few, 2) if many and few else None
    out["bench_peak_rss_mib"] = round(peak_rss_mib())
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
