"""High availability (issue 16): failover drills, the cost of sync replication, slave lag.

1. Drills: a replicated cluster (2 groups x 2, sync replication, `cluster up
   --restart` semantics: a killed broker comes back as a slave), then
   `--drills` runs of `drill failover` on group-1, each killing its current
   master. Goals: 0 acknowledged messages lost over them all; median failover
   (kill -> first ack by the new master) <= 2 s; send errors 0.
2. Throughput: the same closed loop (AsyncProducer, 256 in flight, 128 B) against
   2 sync-replicated groups (masters + slaves) and against 2 single-copy brokers,
   interleaved rounds, median. Goal: sync costs <= 30 % (ratio >= 0.70).
3. Lag: 1 group x 2 with async replication at 5,000 msgs/s; the slave's lag in
   seconds as its master reports it (HA_STATE, every 50 ms). Goal: p99 < 10 ms.

    .venv/bin/python bench/ha_failover.py [--drills 10] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._util import cluster_peak_rss_mib, peak_rss_mib  # noqa: E402
from broker_core.client.aio_producer import AsyncProducer  # noqa: E402
from broker_core.cluster.drill import DrillSpec, run_drill  # noqa: E402
from broker_core.cluster.launcher import Cluster  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402
from broker_core.cluster.roles import broker_role, group_records  # noqa: E402
from broker_core.ha.routes import routes_for  # noqa: E402


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)




def cluster(data: Path, **kw) -> Cluster:
    n = kw.get("groups", 0) * kw.get("replicas", 1) or kw.get("n", 2)
    c = Cluster(kw.pop("n", 0), free_port_range(3 * n + 1), data, segment_size="64M",
                name=f"bench-{os.getpid()}", **kw)
    c.up(timeout=60)
    return c




def drills(data: Path, n: int, rate: float) -> dict:
    c = cluster(data, groups=2, replicas=2, replication="sync")
    stop = threading.Event()
    sup = threading.Thread(target=c.supervise, args=(stop.is_set, True), daemon=True)
    sup.start()
    runs = []
    try:
        for i in range(n):
            r = run_drill(c.file, DrillSpec(group="group-1", rate=rate, duration=8.0,
                                            kill_after=3.0, ready_timeout=60))
            runs.append(r.to_dict())
            fo = f"{r.failover_s:.3f} s" if r.failover_s is not None else "never"
            say(f"  drill {i + 1}: {r.old_master} -> {r.new_master} failover {fo}, acked "
                f"{r.acked}, lost {r.lost}, dup {r.duplicates}, errors {r.send_errors}")
        rss = cluster_peak_rss_mib(c)
    finally:
        stop.set()
        sup.join(5)
        c.down(grace=5)
    fo = [r["failover_s"] for r in runs if r["failover_s"] is not None]
    return {"drills": runs, "lost": sum(r["lost"] for r in runs),
            "send_errors": sum(r["send_errors"] for r in runs),
            "duplicates": sum(r["duplicates"] for r in runs),
            "failover_median_s": statistics.median(fo) if fo else None,
            "failover_max_s": max(fo) if fo else None, "broker_peak_rss_mib": rss}


async def closed_loop(producer: AsyncProducer, seconds: float, inflight: int = 256) -> float:
    loop = asyncio.get_running_loop()
    done = 0
    end = loop.time() + seconds

    async def worker() -> None:
        nonlocal done
        while loop.time() < end:
            await producer.send("tput", b"x" * 128)
            done += 1

    t0 = loop.time()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    return done / (loop.time() - t0)


def throughput(data: Path, rounds: int, seconds: float) -> dict:
    sync = cluster(data / "sync", groups=2, replicas=2, replication="sync")
    single = cluster(data / "single", n=2)
    out: dict[str, list[float]] = {"sync": [], "single": []}
    try:
        routes = routes_for(sync.file)
        routes.wait()
        for _ in range(rounds):
            for kind in ("sync", "single"):
                async def run(kind=kind) -> float:
                    kw = {"routes": routes} if kind == "sync" else {
                        "brokers": single.file.addrs}
                    async with AsyncProducer(fuse=False, **kw) as p:
                        await closed_loop(p, 1.0)  # warm-up
                        return await closed_loop(p, seconds)
                out[kind].append(asyncio.run(run()))
        routes.close()
        rss = max(cluster_peak_rss_mib(sync), cluster_peak_rss_mib(single))
    finally:
        sync.down(grace=5)
        single.down(grace=5)
    s, o = statistics.median(out["sync"]), statistics.median(out["single"])
    return {"sync_msgs_s": s, "single_copy_msgs_s": o, "ratio": s / o, "rounds": out,
            "broker_peak_rss_mib": rss}


def lag(data: Path, rate: float, seconds: float) -> dict:
    c = cluster(data, groups=1, replicas=2, replication="async")
    samples: list[float] = []
    try:
        rec = group_records(c.file)["group-1"]
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.05):
                for slave in broker_role(rec.master_addr).get("slaves", []):
                    samples.append(slave["lag_s"])

        t = threading.Thread(target=sample, daemon=True)
        routes = routes_for(c.file)
        routes.wait()

        async def paced() -> int:
            loop = asyncio.get_running_loop()
            async with AsyncProducer(routes=routes, fuse=False) as p:
                tasks, start, seq = [], loop.time(), 0
                while loop.time() - start < seconds:
                    due = int((loop.time() - start) * rate)
                    while seq < due:
                        tasks.append(asyncio.ensure_future(p.send("lag", b"x" * 128)))
                        seq += 1
                    await asyncio.sleep(0.002)
                await asyncio.gather(*tasks)
                return seq

        t.start()
        sent = asyncio.run(paced())
        stop.set()
        t.join()
        routes.close()
    finally:
        c.down(grace=5)
    samples.sort()
    p99 = samples[int(0.99 * (len(samples) - 1))] if samples else None
    return {"rate": rate, "sent": sent, "samples": len(samples), "lag_p50_s":
            samples[len(samples) // 2] if samples else None, "lag_p99_s": p99,
            "lag_max_s": samples[-1] if samples else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drills", type=int, default=10)
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--only", default="drills,throughput,lag",
                    help="comma-separated parts to run (drills,throughput,lag)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    parts = set(args.only.split(","))
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="fg-ha-bench-") as tmp:
        data = Path(tmp)
        result: dict = {"load_before": load}
        goals = {}
        if "drills" in parts:
            say(f"drills ({args.drills} at {args.rate:g} msgs/s, 8 s each, kill at 3 s)")
            d = result["drills"] = drills(data / "drills", args.drills, args.rate)
            goals["no acked message lost"] = d["lost"] == 0
            goals["median failover <= 2 s"] = (d["failover_median_s"] is not None
                                               and d["failover_median_s"] <= 2.0)
            goals["send errors 0"] = d["send_errors"] == 0
        if "throughput" in parts:
            say("throughput (closed loop, 256 in flight, 128 B)")
            t = result["throughput"] = throughput(data / "tput", args.rounds, args.seconds)
            goals["sync >= 70 % of single-copy throughput"] = t["ratio"] >= 0.70
        if "lag" in parts:
            say("slave lag (async replication, 5,000 msgs/s, 10 s)")
            lg = result["lag"] = lag(data / "lag", 5000.0, 10.0)
            goals["async slave lag p99 < 10 ms at 5,000/s"] = (lg["lag_p99_s"] is not None
                                                               and lg["lag_p99_s"] < 0.010)
    result["client_peak_rss_mib"] = peak_rss_mib()
    result["goals"] = goals
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        if "drills" in result:
            d = result["drills"]
            print(f"\ndrills: {args.drills}, lost {d['lost']}, duplicates {d['duplicates']}, "
                  f"send errors {d['send_errors']}, failover median "
                  f"{d['failover_median_s']:.3f} s max {d['failover_max_s']:.3f} s, broker "
                  f"peak RSS {d['broker_peak_rss_mib']:.0f} MiB")
        if "throughput" in result:
            t = result["throughput"]
            print(f"throughput: sync {t['sync_msgs_s']:,.0f} msgs/s, single copy "
                  f"{t['single_copy_msgs_s']:,.0f} msgs/s, ratio {t['ratio']:.2f}, broker "
                  f"peak RSS {t['broker_peak_rss_mib']:.0f} MiB")
        if "lag" in result:
            lg = result["lag"]
            print(f"async lag at 5,000/s: p50 {lg['lag_p50_s'] * 1000:.2f} ms, p99 "
                  f"{lg['lag_p99_s'] * 1000:.2f} ms, max {lg['lag_max_s'] * 1000:.2f} ms "
                  f"({lg['samples']} samples)")
        print(f"client peak RSS {result['client_peak_rss_mib']:.0f} MiB; load average "
              f"before {load:.1f}")
        for goal, met in goals.items():
            print(f"  {'met   ' if met else 'MISSED'} {goal}")
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
