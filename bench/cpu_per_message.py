"""CPU per message (user + system, from /proc) of every process a message passes, in one run.

What `make demo` costs on two cores is CPU per message times messages per second, so
this is the figure the broker's hot paths are judged by (issue 24). Scenarios, each
measured over the same window after a warm-up:

- floor: a bare uvloop server (written here) answering the same paced SEND frames
  with a canned OK, the least any Python server on an event loop can spend;
- single: one single-copy broker (flush async), paced, then flat out (64 in flight);
  paced again with at-least-once sends (no producer id): what idempotence costs;
- sync pair: a master and its slave with sync replication (ZooKeeper, a controller);
- + consumers: the same with two consumer groups reading everything (a process of
  their own, measured too);
- + trace: the same with every message traced (no consumers);
- demo: `floodgate demo` as `make demo` runs it, headless: every process per
  message acknowledged, and the total cores.

Messages are counted by the broker (its put counter) where there is one; the client
is `floodgate bench produce` in its own process. Ratios against the floor and
against the single broker are the figures to trust on a shared machine.

    .venv/bin/python bench/cpu_per_message.py [--rate 2000] [--seconds 15] [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _util import peak_rss_mib  # noqa: E402
from proc_figures import (  # noqa: E402
    Window,
    cmdline,
    descendants,
    floor_servers,
    measure,
    stored_msgs,
)

from broker_core.cluster.launcher import Cluster  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402

FLOODGATE = [sys.executable, "-m", "console.cli"]
GOALS = {  # issue 24
    "single paced / floor": 2.0,
    "sync master / single paced": 1.5,
    "idempotent / at-least-once sends, broker": 1.1,  # (issue 61: dedup must be cheap)
    "slave / floor": 1.0,
    "consumer group on the master (us/msg)": 15.0,
    "demo consumer process (us/msg consumed)": 20.0,
    "trace cost on the master": 1.15,
}


def producer(target: list[str], seconds: float, rate: float | None, topic: str = "cpu",
             extra: tuple[str, ...] = ()) -> subprocess.Popen:
    argv = [*FLOODGATE, "bench", "produce", *target, "--duration", str(seconds),
            "--topic", topic, "--size", "128", "--no-fuse", "--json", *extra]
    if rate:
        argv += ["--rate", str(rate)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def finish(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate(timeout=120)
    try:
        return json.loads(out)
    except ValueError:
        return {}


@contextmanager
def cluster(tmp: Path, **kw):
    c = Cluster(kw.pop("n", 1), free_port_range(32), tmp / f"c{time.monotonic_ns()}",
                segment_size="256M", **kw)
    c.up(timeout=60)
    try:
        yield c
    finally:
        c.down(grace=5)


# -- scenarios ------------------------------------------------------------------------------

def run_floor(tmp: Path, rate: float, seconds: float, warm: float, relay: bool = False,
              flags: tuple[str, ...] = ()) -> Window:
    """The bare server paced as the brokers are; `relay`: the floor of a sync pair."""
    with floor_servers(relay) as (port, pids):
        prod = producer(["--brokers", f"127.0.0.1:{port}"], warm + seconds + 1, rate,
                        extra=flags)
        time.sleep(warm)
        w = measure({**pids, "producer": prod.pid}, seconds)
        w.msgs = round(rate * w.seconds)
        finish(prod)
        return w


def run_single(tmp: Path, rate: float | None, seconds: float, warm: float,
               flags: tuple[str, ...] = ()) -> Window:
    with cluster(tmp) as c:
        b = c.file.brokers[0]
        prod = producer(["--cluster", str(c.path)], warm + seconds + 1, rate, extra=flags)
        time.sleep(warm)
        w = measure({"broker": c.procs[b.name].pid, "producer": prod.pid}, seconds,
                    lambda: stored_msgs(b.http))
        finish(prod)
        return w


def consumer_main(cluster_file: str, groups: str) -> None:
    """Consume everything of topic `cpu` in each group (threads), print the count on exit."""
    import threading

    from broker_core.client.consumer import Consumer
    from broker_core.cluster.cluster_file import load_cluster
    from broker_core.ha.routes import routes_for

    spec = load_cluster(cluster_file)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    counts = {}

    def run(group: str) -> None:
        routes = routes_for(spec) if spec.replicated else None
        with Consumer(group, "cpu", None if routes else spec.addrs, routes=routes) as c:
            n = 0
            while not stop.is_set():
                n += len(c.poll(32, timeout=0.5))
                counts[group] = n
                c.commit() if n % 1024 < 32 else None

    threads = [threading.Thread(target=run, args=(g,), daemon=True) for g in groups.split(",")]
    for t in threads:
        t.start()
    while not stop.wait(0.2):
        Path(cluster_file + ".consumed").write_text(str(sum(counts.values())))
    Path(cluster_file + ".consumed").write_text(str(sum(counts.values())))


def run_pair(tmp: Path, rate: float, seconds: float, warm: float, consumers: bool = False,
             trace: bool = False, flags: tuple[str, ...] = ()) -> Window:
    """`flags`: more for the producer (`bench produce`), e.g. --linger-ms."""
    with cluster(tmp, n=0, groups=1, replicas=2, replication="sync") as c:
        from broker_core.cluster.roles import group_records

        master = group_records(c.file)["group-1"].master
        slave = next(b.name for b in c.file.brokers if b.name != master)
        mentry = c.file.broker(master)
        subprocess.run([*FLOODGATE, "bench", "produce", "--cluster", str(c.path), "--count",
                        "10", "--topic", "cpu"], capture_output=True, timeout=60)
        procs = {"master": c.procs[master].pid, "slave": c.procs[slave].pid}
        cons = None
        if consumers:
            cons = subprocess.Popen([sys.executable, __file__, "--consume", str(c.path),
                                     "billing,warehouse"])
            procs["consumers"] = cons.pid
        prod = producer(["--cluster", str(c.path)], warm + seconds + 1, rate,
                        extra=(*(("--trace-rate", "1") if trace else ()), *flags))
        procs["producer"] = prod.pid
        time.sleep(warm)
        consumed_file = Path(str(c.path) + ".consumed")

        def consumed() -> int:
            try:
                return int(consumed_file.read_text() or 0)
            except (OSError, ValueError):
                return 0

        w = measure(procs, seconds, lambda: stored_msgs(mentry.http), consumed)
        finish(prod)
        if cons is not None:
            cons.terminate()
            cons.wait(10)
        return w


def run_demo(tmp: Path, seconds: float, warm: float, groups: int,
             rate: float | None = None, flags: tuple[str, ...] = ()) -> tuple[Window, dict]:
    """`floodgate demo --groups G --headless` as make demo runs it (with the TUI)."""
    base = free_port_range(3 * 2 * groups + 2)
    extra = [*(["--rate", f"{rate:g}"] if rate else []), *flags]
    proc = subprocess.Popen([*FLOODGATE, "demo", *extra, "--groups", str(groups), "--headless",
                             str(warm + seconds + 30), "--json", "--with-tui", "--base-port",
                             str(base)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env={**os.environ, "TMPDIR": str(tmp)})
    deadline = time.monotonic() + 60  # the cluster, then the clients 4 s after the load
    while not any("console.demo.clients" in cmdline(c) for c in descendants(proc.pid)):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError("the demo's clients never started")
        time.sleep(0.2)
    time.sleep(warm)
    procs = {}
    for pid in [proc.pid, *descendants(proc.pid)]:
        line = cmdline(pid)
        if "broker serve" in line or "broker_core broker" in line:
            name = line.split("--name ")[1].split()[0]
            procs[name] = pid
        elif "console.demo.clients" in line:
            procs["clients"] = pid
        elif "bench produce" in line:
            procs["producer"] = pid
        elif "controller" in line and ("console.cli" in line or "broker_core" in line):
            procs["controller"] = pid
        elif "zookeeper" in line.lower():
            procs["zookeeper"] = pid
        elif pid == proc.pid:
            procs["demo (console, fault script)"] = pid
    from broker_core.cluster.cluster_file import load_cluster

    spec = load_cluster(next(tmp.glob("floodgate-demo-*/cluster.toml")))
    if spec.tls_ca:  # the demo serves TLS: its HTTP ports too
        from broker_core.acl import tls

        tls.use(spec.tls_ca)

    def stored() -> int:  # by every master: the load, the batch producer, trace batches
        total = 0
        for b in spec.brokers:
            try:
                total += stored_msgs(b.http)
            except OSError:
                pass
        return total

    deadline = time.monotonic() + 15  # a loaded host: the first sends may still be on their way
    while not stored():
        if time.monotonic() > deadline:
            raise RuntimeError("no master of the demo answered /stats with a message stored")
        time.sleep(0.5)
    w = measure(procs, seconds, stored)
    proc.send_signal(signal.SIGTERM)  # the run ends here: its summary, then everything stops
    out, _ = proc.communicate(timeout=120)
    summary = json.loads(out) if out.strip() else {}
    return w, summary


# -- report ---------------------------------------------------------------------------------

def row(label: str, w: Window, who: str, per: int | None = None) -> str:
    return (f"| {label} | {w.us_per_msg(who, per):,.1f} µs | {w.cpu[who] / w.seconds:.0%} "
            f"| {w.rss.get(who, 0):,.0f} MiB |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warm", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3,
                    help="each round measures every scenario in turn; medians are reported")
    ap.add_argument("--groups", type=int, default=4, help="demo groups (make demo's)")
    ap.add_argument("--demo-rate", type=float, help="demo --rate (default: the demo's own)")
    ap.add_argument("--demo-flags", default="", metavar="'--no-tls ...'",
                    help="more flags for the demo (what a part costs: --no-tls, --no-acl)")
    ap.add_argument("--only", help="comma-separated: floor,single,alo,flat,pair,consumers,"
                    "trace,demo")
    ap.add_argument("--consume", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.consume:
        consumer_main(*args.consume)
        return 0
    only = set((args.only or "floor,single,alo,flat,pair,consumers,trace,demo").split(","))
    tmp = Path(tempfile.mkdtemp(prefix="fg-cpu-"))
    r, s, wu = args.rate, args.seconds, args.warm
    runs: dict[str, list[Window]] = {}
    try:
        for i in range(args.rounds):
            print(f"round {i + 1} of {args.rounds}", file=sys.stderr)
            for name, run in (("floor", lambda: run_floor(tmp, r, s, wu)),
                              ("single", lambda: run_single(tmp, r, s, wu)),
                              ("alo", lambda: run_single(tmp, r, s, wu, ("--at-least-once",))),
                              ("flat", lambda: run_single(tmp, None, s, wu)),
                              ("pair", lambda: run_pair(tmp, r, s, wu)),
                              ("consumers", lambda: run_pair(tmp, r, s, wu, consumers=True)),
                              ("trace", lambda: run_pair(tmp, r, s, wu, trace=True))):
                if name in only:
                    runs.setdefault(name, []).append(run())
        demo = None
        if "demo" in only:
            demo = run_demo(tmp, s * 3, wu, args.groups, args.demo_rate,
                            tuple(args.demo_flags.split()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def med(name: str, who: str, per: str = "msgs") -> float:
        return statistics.median(w.us_per_msg(who, w.consumed if per == "consumed" else None)
                                 for w in runs[name])

    def line(label: str, name: str, who: str, per: str = "msgs") -> str:
        ws = runs[name]
        cores = statistics.median(w.cpu[who] / w.seconds for w in ws)
        rss = max(w.rss.get(who, 0) for w in ws)
        return f"| {label} | {med(name, who, per):,.1f} µs | {cores:.0%} | {rss:,.0f} MiB |"

    lines = [f"| what (median of {args.rounds} rounds) | CPU / message | cores | peak RSS |",
             "|---|---:|---:|---:|"]
    rows = [("floor", f"floor: bare uvloop server, paced {r:g}/s", "floor", "msgs"),
            ("single", f"single-copy broker, paced {r:g}/s", "broker", "msgs"),
            ("single", "  its producer (bench produce)", "producer", "msgs"),
            ("alo", "single-copy broker, at-least-once sends (no producer id)", "broker",
             "msgs"),
            ("alo", "  its producer", "producer", "msgs"),
            ("flat", "single-copy broker, flat out", "broker", "msgs"),
            ("pair", f"master, sync replication, paced {r:g}/s", "master", "msgs"),
            ("pair", "  its slave", "slave", "msgs"),
            ("consumers", "master + 2 consumer groups reading everything", "master", "msgs"),
            ("consumers", "  the consumer process (per message consumed)", "consumers",
             "consumed"),
            ("trace", "master, every message traced", "master", "msgs"),
            ("trace", "  its producer", "producer", "msgs")]
    for name, label, who, per in rows:
        if name in runs:
            if name == "flat":
                rate = statistics.median(w.msgs / w.seconds for w in runs[name])
                label += f" ({rate:,.0f}/s)"
            lines.append(line(label, name, who, per))
    if demo is not None:
        w, _summary = demo
        total = sum(w.cpu.values()) / w.seconds
        lines.append(f"| **demo** ({args.groups} groups, headless with the TUI): "
                     f"{w.msgs / w.seconds:,.0f} msgs/s stored, CPU per message stored "
                     f"| {sum(w.cpu.values()) / w.msgs * 1e6:,.0f} µs "
                     f"| **{total:.2f}** | |")
        for who in sorted(w.cpu):
            lines.append(row(f"  {who}", w, who))
    print("\n".join(lines))

    def per_round(fn) -> float:  # the median of each round's ratio: peers measured together
        return statistics.median(fn(i) for i in range(args.rounds))

    ratios = {}
    if {"floor", "single"} <= runs.keys():
        ratios["single paced / floor"] = per_round(
            lambda i: runs["single"][i].us_per_msg("broker") / runs["floor"][i].us_per_msg("floor"))
    if {"single", "alo"} <= runs.keys():
        ratios["idempotent / at-least-once sends, broker"] = per_round(
            lambda i: runs["single"][i].us_per_msg("broker") / runs["alo"][i].us_per_msg("broker"))
    if {"single", "pair"} <= runs.keys():
        ratios["sync master / single paced"] = per_round(
            lambda i: runs["pair"][i].us_per_msg("master") / runs["single"][i].us_per_msg("broker"))
    if {"floor", "pair"} <= runs.keys():
        ratios["slave / floor"] = per_round(
            lambda i: runs["pair"][i].us_per_msg("slave") / runs["floor"][i].us_per_msg("floor"))
    if {"pair", "consumers"} <= runs.keys():
        ratios["consumer group on the master (us/msg)"] = per_round(
            lambda i: (runs["consumers"][i].us_per_msg("master")
                       - runs["pair"][i].us_per_msg("master")) / 2)
        ratios["demo consumer process (us/msg consumed)"] = med("consumers", "consumers",
                                                                "consumed")
    if {"pair", "trace"} <= runs.keys():
        ratios["trace cost on the master"] = per_round(
            lambda i: runs["trace"][i].us_per_msg("master") / runs["pair"][i].us_per_msg("master"))
    missed = 0
    print()
    for name, value in ratios.items():
        ok = value <= GOALS[name]
        missed += not ok
        print(f"{name}: {value:.2f} (goal <= {GOALS[name]:g}) {'ok' if ok else 'MISSED'}")
    print(f"bench process peak RSS {peak_rss_mib():.0f} MiB")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
