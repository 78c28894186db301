"""The two ways a group survives a lost broker, side by side in one run (issue 62):
a controller and ZooKeeper (master/slave, sync replication) or Raft (3 members).

1. Throughput: the same closed loop (AsyncProducer, 128 B) with 1 and with 64 sends in
   flight against one group of each kind, interleaved rounds, median: Raft with 3
   members (its log the CommitLog's stream), master/slave with 2 and with 3 (a send
   waits for every in-sync slave).
   Goal: Raft >= 80 % of master/slave sync (2) at both loads (the Mogujie talk's Corgi
   accepted a 30 % drop; DLedger users saw 87 %).
2. Failover: a group under a paced sync load (one send at a time), its leader (master)
   killed with SIGKILL `--kills` times; the time from the kill to the first send
   answered after it (by the new leader), and at the end every acknowledged message
   read back. Raft: the members elect; master/slave: the controller promotes
   (bench/ha_failover.py's drills: `drill failover` on 2 groups x 2). Goals: Raft's
   median <= 2 s (DLedger ~10 s); 0 acknowledged and lost in either.
3. Idle: each cluster's brokers with no client, CPU a second each (/proc).
4. Paced (`--only paced`): a steady load (`--paced-rates`, one send in flight at a
   time), the CPU a second of the leader (master) and of each other member: what each
   mode costs at the rates most groups carry.

Beside each rate, the CPU a message of the leader (master) and of the other members
(`cpu_us_per_msg`, /proc over the measured seconds): where each mode's time goes.

    .venv/bin/python bench/raft_modes.py [--kills 10] [--rounds 3] [--only ...] [--json]
        [--before TREE]   (throughput, paced: the code of TREE, a worktree, beside this code)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._util import cluster_peak_rss_mib, peak_rss_mib, print_figures  # noqa: E402
from bench.ha_failover import closed_loop  # noqa: E402
from bench.ha_failover import drills as ha_drills  # noqa: E402
from bench.proc_figures import cpu_seconds  # noqa: E402
from broker_core.client.aio_producer import AsyncProducer  # noqa: E402
from broker_core.cluster.launcher import Cluster  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402
from broker_core.ha.routes import routes_for  # noqa: E402

KINDS = {"raft-3": {"replicas": 3, "consensus": "raft"},
         "sync-2": {"replicas": 2, "replication": "sync"},
         "sync-3": {"replicas": 3, "replication": "sync"}}


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def group(data: Path, tree: Path | None = None, **kw) -> Cluster:
    """One group of `kw`'s kind; `tree`: a checkout whose code its brokers run (they
    start as `python -m broker_core` in the working directory), else this one's."""
    n = kw["replicas"]
    c = Cluster(0, free_port_range(3 * n + 1), data, segment_size="64M",
                name=f"bench-{os.getpid()}-{data.name}", groups=1, **kw)
    here = os.getcwd()
    os.chdir(tree or ROOT)
    try:
        c.up(timeout=60)
    finally:
        os.chdir(here)
    return c


@contextlib.contextmanager
def running(data: Path, kinds: dict[str, dict],
            trees: dict[str, Path | None]) -> Iterator[tuple[dict, dict, dict]]:
    """One group of each kind (`trees`: the checkout a kind's brokers run, else this
    one), their routes followed: (clusters, routes, figures); `figures` gets the brokers'
    peak RSS when the body is done."""
    clusters = {k: group(data / k, trees.get(k), **kw) for k, kw in kinds.items()}
    figures: dict = {}
    try:
        routes = {k: routes_for(c.file) for k, c in clusters.items()}
        for r in routes.values():
            r.wait()
        yield clusters, routes, figures
        for r in routes.values():
            r.close()
        figures["broker_peak_rss_mib"] = max(cluster_peak_rss_mib(c)
                                             for c in clusters.values())
    finally:
        for c in clusters.values():
            c.down(grace=5)


def throughput(data: Path, rounds: int, seconds: float, before: Path | None = None) -> dict:
    """`before`: another checkout (the code before a change, a git worktree): a raft
    group of its code runs beside the others, each round, so that a change is read
    against the code before it in the same minutes (this host's speed moves within
    seconds: runs an hour apart differ by more than most changes)."""
    kinds = {**KINDS, **({"raft-3-before": KINDS["raft-3"]} if before else {})}
    trees = {"raft-3-before": before}
    out: dict[str, dict[int, list[float]]] = {k: {1: [], 64: []} for k in kinds}
    # CPU a message of the leader (master) and of each other member, from /proc: where
    # a mode's time goes, beside its rate
    cpu: dict[str, dict[int, dict[str, list[float]]]] = {
        k: {n: {"leader": [], "others": []} for n in (1, 64)} for k in kinds}
    with running(data, kinds, trees) as (clusters, routes, figures):
        for _ in range(rounds):
            for inflight in (1, 64):
                for kind, c in clusters.items():
                    async def run(kind=kind, inflight=inflight, c=c) -> float:
                        async with AsyncProducer(routes=routes[kind], fuse=False) as p:
                            await closed_loop(p, 0.5, inflight)  # warm-up
                            leader = routes[kind].records["group-1"].master
                            pids = {n: proc.pid for n, proc in c.procs.items()}
                            before = {n: cpu_seconds(pid) for n, pid in pids.items()}
                            rate = await closed_loop(p, seconds, inflight)
                            sent = rate * seconds
                            for n, pid in pids.items():
                                us = (cpu_seconds(pid) - before[n]) / sent * 1e6
                                cpu[kind][inflight]["leader" if n == leader
                                                    else "others"].append(us)
                            return rate
                    out[kind][inflight].append(asyncio.run(run()))
    rss = figures["broker_peak_rss_mib"]
    med = {k: {n: statistics.median(v) for n, v in by.items()} for k, by in out.items()}
    us = {k: {n: {who: round(statistics.median(v)) for who, v in parts.items() if v}
              for n, parts in by.items()} for k, by in cpu.items()}
    got = {"msgs_s": med, "rounds": out, "broker_peak_rss_mib": rss,
           "cpu_us_per_msg": us,
           "raft_vs_sync2": {n: med["raft-3"][n] / med["sync-2"][n] for n in (1, 64)},
           "raft_vs_sync3": {n: med["raft-3"][n] / med["sync-3"][n] for n in (1, 64)}}
    if before:
        got["raft_vs_before"] = {n: med["raft-3"][n] / med["raft-3-before"][n]
                                 for n in (1, 64)}
        got["raft_vs_before_rounds"] = {
            n: [round(a / b, 3) for a, b in zip(out["raft-3"][n], out["raft-3-before"][n],
                                                strict=True)] for n in (1, 64)}
    return got


def raft_failovers(data: Path, kills: int, rate: float, kind: str = "raft-3") -> dict:
    from broker_core.client.consumer import Consumer
    from broker_core.client.producer import Producer
    from broker_core.cluster.roles import broker_role

    c = group(data, **KINDS[kind])
    stop_sup = threading.Event()
    sup = threading.Thread(target=c.supervise, args=(stop_sup.is_set, True), daemon=True)
    sup.start()
    routes = routes_for(c.file)
    acked: dict[bytes, float] = {}
    errors = [0]
    stop = threading.Event()

    def load() -> None:
        with Producer(routes=routes, fuse=False) as p:
            i, start = 0, time.monotonic()
            while not stop.is_set():
                wait = start + i / rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                body = f"f{i}".encode()
                i += 1
                try:
                    if p.send("failover", body).status == "SEND_OK":
                        acked[body] = time.monotonic()
                except Exception:  # noqa: BLE001 - counted: a send that failed its deadline
                    errors[0] += 1

    times = []
    try:
        routes.wait()
        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        for k in range(kills):
            time.sleep(2.0)
            old = routes.records["group-1"].master
            entry = c.file.broker(old)
            os.kill(c.procs[old].pid, signal.SIGKILL)
            killed = time.monotonic()
            while not any(t > killed + 0.005 for t in list(acked.values())[-50:]):
                if time.monotonic() - killed > 20:
                    break
                time.sleep(0.005)
            after = [t for t in list(acked.values())[-50:] if t > killed + 0.005]
            took = min(after) - killed if after else None
            times.append(took)
            say(f"  {kind} kill {k + 1}: {old} -> "
                f"{routes.records['group-1'].master}, first ack after {took:.3f} s"
                if took is not None else f"  {kind} kill {k + 1}: no ack within 20 s")
            deadline = time.monotonic() + 30  # back (the supervisor), following
            while broker_role(entry.addr).get("role") != "SLAVE" and \
                    time.monotonic() < deadline:
                time.sleep(0.05)
        stop.set()
        loader.join(15)
        got: set[bytes] = set()
        with Consumer("audit", "failover", routes=routes) as consumer:
            deadline = time.monotonic() + 30
            while not set(acked) <= got and time.monotonic() < deadline:
                got |= {m.body for m in consumer.poll(256, timeout=0.5)}
        rss = cluster_peak_rss_mib(c)
    finally:
        stop.set()
        routes.close()
        stop_sup.set()
        c.stop_supervising()
        sup.join(5)
        c.down(grace=5)
    done = [t for t in times if t is not None]
    return {"kills": kills, "failover_s": times, "median_s": statistics.median(done)
            if done else None, "max_s": max(done) if done else None,
            "acked": len(acked), "lost": len(set(acked) - got), "send_errors": errors[0],
            "broker_peak_rss_mib": rss}


def controller_failovers(data: Path, kills: int, rate: float) -> dict:
    """The controller's: bench/ha_failover.py's drills (2 groups x 2, `drill failover`)."""
    d = ha_drills(data, kills, rate)
    return {"kills": kills, "failover_s": [r["failover_s"] for r in d["drills"]],
            "median_s": d["failover_median_s"], "max_s": d["failover_max_s"],
            "acked": sum(r["acked"] for r in d["drills"]), "lost": d["lost"],
            "send_errors": d["send_errors"], "broker_peak_rss_mib": d["broker_peak_rss_mib"]}


def paced(data: Path, rates: list[float], seconds: float, rounds: int,
          before: Path | None = None) -> dict:
    """CPU a second (ms/s, /proc) of the leader (master) and the other members under a
    steady load at each rate: interleaved rounds, median."""
    kinds = {k: KINDS[k] for k in ("raft-3", "sync-2")} | \
        ({"raft-3-before": KINDS["raft-3"]} if before else {})
    got: dict[str, dict[float, dict[str, list[float]]]] = {
        k: {r: {"leader": [], "others": []} for r in rates} for k in kinds}
    with running(data, kinds, {"raft-3-before": before}) as (clusters, routes, figures):
        for _ in range(rounds):
            for rate in rates:
                for kind, c in clusters.items():
                    async def run(kind=kind, rate=rate, c=c) -> None:
                        async with AsyncProducer(routes=routes[kind], fuse=False) as p:
                            loop = asyncio.get_running_loop()
                            await p.send("tput", b"x" * 128)
                            leader = routes[kind].records["group-1"].master
                            pids = {n: proc.pid for n, proc in c.procs.items()}
                            cpu0 = {n: cpu_seconds(pid) for n, pid in pids.items()}
                            t0, sent = loop.time(), 0
                            while (now := loop.time()) - t0 < seconds:
                                if t0 + sent / rate > now:
                                    await asyncio.sleep(t0 + sent / rate - now)
                                await p.send("tput", b"x" * 128)
                                sent += 1
                            took = loop.time() - t0
                            for n, pid in pids.items():
                                got[kind][rate]["leader" if n == leader else "others"].append(
                                    (cpu_seconds(pid) - cpu0[n]) / took * 1000)
                    asyncio.run(run())
    return {**figures, **{
        k: {f"{r:g}/s": {who: round(statistics.median(v), 1) for who, v in parts.items()}
            for r, parts in by.items()} for k, by in got.items()}}


def idle(data: Path, seconds: float) -> dict:
    """CPU a second of each idle broker, per kind (utime + stime from /proc)."""
    out = {}
    for kind in ("raft-3", "sync-2"):
        c = group(data / kind, **KINDS[kind])
        try:
            time.sleep(2.0)  # past the start's work
            before = {n: cpu_seconds(p.pid) for n, p in c.procs.items()}
            time.sleep(seconds)
            after = {n: cpu_seconds(p.pid) for n, p in c.procs.items()}
            each = {n: (after[n] - before[n]) / seconds * 1000 for n in before}
            out[kind] = {"broker_ms_s": each, "max_ms_s": max(each.values())}
        finally:
            c.down(grace=5)
    return out


def write_drills(out: Path, modes: dict[str, dict]) -> None:
    """Each mode's kills as `drill failover` results: the capacity model's MTTR."""
    import json

    out.mkdir(parents=True, exist_ok=True)
    for mode, result in modes.items():
        drills = [{"failover_s": s, "lost": result["lost"] if i == 0 else 0,
                   "mode": mode} for i, s in enumerate(result["failover_s"])]
        (out / f"{mode}-drills.json").write_text(json.dumps(drills, indent=1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--rate", type=float, default=200.0, help="the failover load, msgs/s")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    ap.add_argument("--only", default="throughput,failover,idle",
                    help="any of throughput, failover, idle, paced")
    ap.add_argument("--paced-rates", default="300,1000", help="paced: msgs/s, comma-separated")
    ap.add_argument("--drills-out", type=Path, metavar="DIR",
                    help="write each mode's failovers as drill results (raft-drills.json, "
                    "controller-drills.json) for `floodgate capacity availability "
                    "--from-drill`")
    ap.add_argument("--before", type=Path, metavar="TREE",
                    help="throughput, paced: also a raft group running this checkout's code (the "
                    "code before a change: `git worktree add TREE REV`), read against it")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.before is not None and not (args.before / "broker_core" / "__main__.py").is_file():
        ap.error(f"--before: {args.before} is not a checkout of this project")
    parts = set(args.only.split(","))
    try:
        rates = [float(r) for r in args.paced_rates.split(",")]
    except ValueError:
        rates = []
    if not rates or min(rates) <= 0:
        ap.error(f"--paced-rates: {args.paced_rates!r} is not a list of rates above 0")
    result: dict = {"load_before": os.getloadavg()[0]}
    goals = {}
    with tempfile.TemporaryDirectory(prefix="fg-raft-bench-") as tmp:
        data = Path(tmp)
        if "throughput" in parts:
            say("throughput (closed loop, 128 B, 1 and 64 in flight)")
            t = result["throughput"] = throughput(data / "tput", args.rounds, args.seconds,
                                                  args.before and args.before.resolve())
            for n in (1, 64):
                goals[f"raft >= 80 % of master/slave sync at {n} in flight"] = \
                    t["raft_vs_sync2"][n] >= 0.80
        if "failover" in parts:
            say(f"failover ({args.kills} kills each, {args.rate:g} msgs/s)")
            r = result["raft_failover"] = raft_failovers(data / "raft", args.kills, args.rate)
            m = result["controller_failover"] = controller_failovers(data / "ctl", args.kills,
                                                                     args.rate)
            if args.drills_out:
                write_drills(args.drills_out, {"raft": r, "controller": m})
            goals["raft: median failover <= 2 s"] = \
                r["median_s"] is not None and r["median_s"] <= 2.0
            goals["0 acknowledged and lost (both)"] = not (r["lost"] or m["lost"])
        if "paced" in parts:
            say(f"paced ({args.paced_rates} msgs/s, {args.rounds} rounds of {args.seconds:g} s)")
            result["paced_cpu_ms_s"] = paced(data / "paced", rates, args.seconds, args.rounds,
                                             args.before and args.before.resolve())
        if "idle" in parts:
            say(f"idle ({args.idle_seconds:g} s)")
            result["idle"] = idle(data / "idle", args.idle_seconds)
    result["bench_peak_rss_mib"] = round(peak_rss_mib(), 1)
    result["goals"] = goals
    print_figures(result, args.json)
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
