"""Consumer retry and the dead-letter queue under load: a handler failing 10 % of the
messages of a paced stream (2,000 msgs/s by default; half of those once, half every
time), against the same stream with no failures in the same run.

Checks every message is either consumed or in the dead-letter queue after
max_reconsume tries (none lost, none in the DLQ that succeeded), and compares the
healthy messages' end-to-end delay (send -> handled) with the peer's. Goal: p99 not
worse by more than 10 ms.

    .venv/bin/python bench/retry_dlq.py [--rate 2000] [--seconds 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import peak_rss_mib  # noqa: E402

from broker_core.client.admin import ensure_topic  # noqa: E402
from broker_core.client.consumer import Consumer  # noqa: E402
from broker_core.client.producer import Producer  # noqa: E402
from broker_core.client.retry import retry_times  # noqa: E402
from broker_core.cluster.launcher import Cluster  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402
from heatmap import LatencyHistogram  # noqa: E402

STAMP = struct.Struct(">dQ")
MAX_RECONSUME = 2


def run(addrs: dict, label: str, failing: bool, rate: float, seconds: float) -> dict:
    topic, group = f"retry-{label}", f"g-{label}"
    hist, done, lock = LatencyHistogram(), set(), threading.Lock()

    def handler(m) -> None:
        sent, seq = STAMP.unpack_from(m.body)
        if failing and seq % 10 == 0 and (seq % 20 == 0 or retry_times(m) == 0):
            raise RuntimeError("fails")  # seq % 20: every time; else only the first time
        with lock:
            done.add(seq)
            if seq % 10:
                hist.record(max(0.0, time.time() - sent))

    ensure_topic(addrs, topic)  # the consumer owns its queues from its first heartbeat
    stop = threading.Event()
    consumer = Consumer(group, topic, addrs, max_reconsume=MAX_RECONSUME, retry_delay="1s")
    worker = threading.Thread(target=consumer.consume, args=(handler,),
                              kwargs={"timeout": 0.05, "stop": stop}, daemon=True)
    worker.start()
    time.sleep(3)  # joined
    sent = 0
    with Producer(addrs, fuse=False) as p:
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            wait = t0 + sent / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            p.send(topic, STAMP.pack(time.time(), sent) + b"x" * 100)
            sent += 1
    permanent = {s for s in range(sent) if failing and s % 20 == 0}
    deadline = time.monotonic() + 30  # the last retries are due MAX_RECONSUME s later
    while len(done) < sent - len(permanent) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(MAX_RECONSUME + 1.5)  # the hopeless ones reach the dead letters
    stop.set()
    worker.join(10)
    consumer.close()
    dead = set()
    with Consumer(f"{group}-dlq-reader", f"%DLQ%{group}", addrs, retry=False) as dlq:
        end = time.monotonic() + 10
        while len(dead) < len(permanent) and time.monotonic() < end:
            dead.update(STAMP.unpack_from(m.body)[1] for m in dlq.poll(256, timeout=0.2))
    lost = set(range(sent)) - done - dead
    return {"sent": sent, "handled": len(done), "dead_letters": len(dead),
            "lost": len(lost), "dead_that_succeeded": len(dead & done),
            "healthy_delay_ms": {"p50": round((hist.quantile(0.5) or 0) * 1000, 2),
                                 "p99": round((hist.quantile(0.99) or 0) * 1000, 2),
                                 "max": round((hist.max or 0) * 1000, 2)}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="floodgate-retry-") as tmp:
        cluster = Cluster(1, free_port_range(2), Path(tmp) / "c", flush="async")
        cluster.up()
        try:
            out = {"no_failures": run(cluster.file.addrs, "peer", False, args.rate,
                                      args.seconds),
                   "ten_percent_failing": run(cluster.file.addrs, "fail", True, args.rate,
                                              args.seconds)}
        finally:
            cluster.down()
    a, b = out["no_failures"]["healthy_delay_ms"], out["ten_percent_failing"]["healthy_delay_ms"]
    out["healthy_p99_worse_by_ms"] = round(b["p99"] - a["p99"], 2)
    out["bench_peak_rss_mib"] = round(peak_rss_mib())
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
