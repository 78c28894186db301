"""Flow control (限流) and consumer backlog (issue 17), each against a peer in the same run.

1. Admission cost: `Broker.send_now` in-process, quotas off against quotas on
   (a topic and a group quota that never refuse), alternated rounds, best of
   each: the difference per send. Goal <= 2 µs.
2. Quota accuracy: a broker process with a topic quota of `--quota` msgs/s;
   `floodgate bench produce` offers 5x that for 10 s with no retries after
   FLOW_CONTROL: messages stored against quota x 10 s + burst. Goal +-5 %.
3. A flooding producer group beside a calm one on the same broker: the calm
   group's send p99 (500 msgs/s) while the flood sends flat out (batches of 10,
   64 in flight), with the flood's group under a quota against no quota (the
   peer). Goal: calm p99 < 20 ms.
4. Backlog: a consumer group stops moving (still heartbeating); the broker's
   /stats is read every 100 ms until the group reads STALLED: seconds from its
   last commit, and the broker's polls (one a second) that found no movement.
   Goal: STALLED within 2 polls.

    .venv/bin/python bench/flow_control.py [--quota 1000] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _util import peak_rss_mib  # noqa: E402

from broker_core import protocol as p  # noqa: E402
from broker_core.client import admin  # noqa: E402
from broker_core.cluster.launcher import Cluster  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402
from broker_core.server.broker import Broker  # noqa: E402
from broker_core.server.config import BrokerConfig  # noqa: E402
from broker_core.server.flow_control import Quota  # noqa: E402

FLOODGATE = [sys.executable, "-m", "console.cli"]
FLOOD_BATCH = 10  # the flood sends batches: more messages per request than one client could


def children_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


# -- 1. admission cost ------------------------------------------------------------------------
def admission_cost(tmp: Path, n: int = 50_000, rounds: int = 7) -> dict:
    broker = Broker(BrokerConfig("bench", tmp / "admission", segment_bytes=256 << 20))
    frame = p.encode_send("orders", -1, p.OutMessage(b"x" * 128,
                                                     properties={p.PRODUCER_GROUP: "app"}))

    def per_send() -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            broker.send_now(frame)
        return (time.perf_counter() - t0) / n

    per_send()  # warm-up: topic files, caches
    def quotas_on() -> float:
        broker.flow.set(Quota.make("topic", "orders", 1e12, burst=1e12))
        broker.flow.set(Quota.make("group", "app", 1e12, burst=1e12))
        return per_send()

    def quotas_off() -> float:
        broker.flow.clear()
        return per_send()

    off, on = [], []
    for i in range(rounds):  # alternate which goes first: drift favours neither
        first, second = (quotas_off, quotas_on) if i % 2 == 0 else (quotas_on, quotas_off)
        a, b = first(), second()
        off.append(a if first is quotas_off else b)
        on.append(b if first is quotas_off else a)
    broker.flow.clear()
    broker.close()
    return {"sends_per_round": n, "off_us": min(off) * 1e6, "on_us": min(on) * 1e6,
            "cost_us": (min(on) - min(off)) * 1e6, "goal_us": 2.0}


# -- 2 and 3: a broker process and `floodgate bench produce` -----------------------------------
def produce(cluster: Cluster, *, rate: float | None, seconds: float, group: str,
            topic: str = "orders", flow_retries: int = 3, batch: int = 1) -> subprocess.Popen:
    return subprocess.Popen(
        [*FLOODGATE, "bench", "produce", "--cluster", str(cluster.path), "--topic", topic,
         *(["--rate", str(rate)] if rate else []), "--batch", str(batch),
         "--duration", str(seconds), "--group", group, "--no-fuse",
         "--flow-retries", str(flow_retries), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def result(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate(timeout=120)
    return json.loads(out)


def stats(http: str) -> dict:
    with urllib.request.urlopen(f"http://{http}/stats?history=0", timeout=5) as r:
        return json.loads(r.read())


def quota_accuracy(cluster: Cluster, quota: float, seconds: float = 10.0) -> dict:
    b = cluster.file.brokers[0]
    q = Quota.make("topic", "accuracy", quota)
    admin.quota(b.http, "POST", q.to_dict())
    before = stats(b.http)["topics"]
    out = result(produce(cluster, rate=5 * quota, seconds=seconds, group="accuracy",
                         topic="accuracy", flow_retries=0))
    admin.quota(b.http, "DELETE", query={"kind": "topic", "target": "accuracy"})
    allowed = quota * out["seconds"] + q.burst
    return {"quota": quota, "offered_per_s": 5 * quota, "seconds": out["seconds"],
            "admitted": out["acked"], "allowed": allowed, "refused": out["errors"],
            "error": out["acked"] / allowed - 1, "topics_before": len(before)}


def flood_vs_calm(cluster: Cluster, quota: float | None, seconds: float = 10.0) -> dict:
    """The flood: flat out, batches of FLOOD_BATCH, 64 requests in flight."""
    b = cluster.file.brokers[0]
    if quota:
        admin.quota(b.http, "POST", Quota.make("group", "flood", quota).to_dict())
    f = produce(cluster, rate=None, seconds=seconds + 2, group="flood", batch=FLOOD_BATCH)
    time.sleep(1.0)  # the flood is on before the calm group's first send
    calm = result(produce(cluster, rate=500, seconds=seconds, group="calm"))
    flooded = result(f)
    if quota:
        admin.quota(b.http, "DELETE", query={"kind": "group", "target": "flood"})
    return {"flood_batch": FLOOD_BATCH, "flood_quota": quota,
            "flood_acked_per_s": flooded["tps"], "flood_errors": flooded["errors"],
            "calm_p99_ms": calm["p99_s"] * 1e3, "calm_max_ms": calm["max_s"] * 1e3,
            "calm_acked": calm["acked"], "calm_errors": calm["errors"]}


# -- 4. STALLED ---------------------------------------------------------------------------------
def stalled_after(cluster: Cluster) -> dict:
    from broker_core.client.consumer import Consumer
    from broker_core.client.producer import Producer

    b = cluster.file.brokers[0]
    addrs = {b.name: b.addr}
    with Producer(addrs, fuse=False) as producer, Consumer("stuck", "lagging", addrs) as consumer:
        for _ in range(50):
            producer.send("lagging", b"x")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # a healthy group: consume and commit
            producer.send("lagging", b"x")
            consumer.poll(256, timeout=0.05)
            consumer.commit()
        last_commit = time.monotonic()
        seen, verdicts = None, []
        while time.monotonic() - last_commit < 10:
            producer.send("lagging", b"x")  # lag keeps growing
            consumer.heartbeat()  # alive, not moving
            doc = stats(b.http)
            g = doc.get("consumers", {}).get("stuck")
            if g and (not verdicts or verdicts[-1][1] != g["status"]):
                verdicts.append((round(time.monotonic() - last_commit, 3), g["status"]))
            if g and g["status"] == "STALLED":
                seen = time.monotonic() - last_commit
                break
            time.sleep(0.1)
    # the broker samples once a second: ceil(seen) samples after the last commit, the
    # first of which still saw the offset move
    return {"stalled_after_s": seen,
            "polls_without_movement": None if seen is None else math.ceil(seen) - 1,
            "verdicts": verdicts, "goal_polls": 2}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quota", type=float, default=1000.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out: dict = {"load_avg_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="fg-flow-") as tmp:
        tmp = Path(tmp)
        out["admission"] = admission_cost(tmp)
        out["bench_rss_mib"] = peak_rss_mib()
        cluster = Cluster(1, free_port_range(2), tmp / "cluster", segment_size="256M")
        cluster.up()
        try:
            out["accuracy"] = quota_accuracy(cluster, args.quota)
            out["flood_no_quota"] = flood_vs_calm(cluster, None)
            out["flood_quota"] = flood_vs_calm(cluster, args.quota)
            out["stalled"] = stalled_after(cluster)
        finally:
            cluster.down()
    out["children_peak_rss_mib"] = children_rss_mib()
    out["load_avg_end"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    a, acc = out["admission"], out["accuracy"]
    print(f"admission: {a['off_us']:.2f} µs/send without quotas, {a['on_us']:.2f} with: "
          f"+{a['cost_us']:.2f} µs (goal <= 2)")
    print(f"accuracy: {acc['admitted']:,} admitted of {acc['allowed']:,.0f} allowed "
          f"({acc['error']:+.1%}; goal +-5 %), {acc['refused']:,} refused")
    for key in ("flood_no_quota", "flood_quota"):
        f = out[key]
        print(f"{key}: flood {f['flood_acked_per_s']:,.0f} msgs/s stored, "
              f"{f['flood_errors']:,} refused after backoff; calm p99 "
              f"{f['calm_p99_ms']:.2f} ms, max {f['calm_max_ms']:.1f} ms")
    s = out["stalled"]
    print(f"stalled: STALLED {s['stalled_after_s']} s after the last commit "
          f"({s['polls_without_movement']} broker polls without movement; goal <= 2); "
          f"verdicts {s['verdicts']}")
    print(f"peak RSS: bench {out['bench_rss_mib']:.0f} MiB, broker and clients "
          f"{out['children_peak_rss_mib']:.0f} MiB; load {out['load_avg_start']:.1f} -> "
          f"{out['load_avg_end']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
