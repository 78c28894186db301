"""The backlog test of the Taobao talk: consumers catching up from disk while producers
send with sync flush, under each I/O scheduler the data disk offers.

The talk stored 500 GB, then read 1,024 queues from disk with 1,024 consumer threads
while sending 4 KiB messages with sync flush: 65 ms a send and 1 k/s under CFQ, 5.3 ms
and 8 k/s under deadline. Here: a backlog of `backlog_gib` is written first (a broker
flushing async, the fastest way in), then, for each scheduler:

1. the scheduler set through `floodgate tune apply` (a one-setting profile, journalled)
   and, at the end, `floodgate tune rollback`;
2. the page cache dropped (root), so every byte the consumers read comes from the disk
   (the disk's read counters, /proc/diskstats, say how much did);
3. the broker restarted flushing sync over the same store; `consumers` processes of a
   new group read from the first message kept while a producer sends sync for `seconds`.

Measured: the producer's send p99 and max, the consumers' MB/s (the broker's bytes
out), the disk's read MB/s, the host's iowait.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from broker_core.client import admin
from broker_core.cluster.launcher import Cluster
from broker_core.cluster.ports import free_port_range
from console.errors import CommandFailed
from console.measure.cell_run import produce_argv
from console.measure.host import BrokerWatch, between

TOPIC = "capacity-backlog"
JOIN_S = 4  # consumers joining their group and owning their queues (heartbeats: 2 s)


@dataclass
class BacklogPlan:
    out: Path
    size: int = 4096
    queues: int = 1024
    backlog_gib: float = 8.0
    seconds: float = 30.0
    inflight: int = 8  # the producer's sends in flight (sync flush: each waits for its fsync)
    consumers: int = 4
    schedulers: list[str] | None = None  # default: every one the disk offers
    data: Path | None = None  # on the disk under test (default: a temporary directory)
    state_file: Path | None = None  # where `tune plan` reads it (default: /var/lib/floodgate/)
    runs: list[dict] = field(default_factory=list)

    @property
    def segment(self) -> str:
        """CommitLog segments: 1 GiB, smaller for a small backlog (a disk made for it)."""
        return f"{min(1024, max(64, int(self.backlog_gib * 1024 / 8)))}M"


def offered(device: str) -> tuple[list[str], str]:
    """The schedulers the disk offers and the one in use."""
    text = Path(f"/sys/block/{device}/queue/scheduler").read_text().split()
    return [s.strip("[]") for s in text], next((s.strip("[]") for s in text
                                                 if s.startswith("[")), "")


def data_device(data: Path) -> str:
    from kernel_tuning.device import disks_for_data_dir
    from kernel_tuning.hostfs import HostFS

    disks = disks_for_data_dir(HostFS("/"), data)
    if not disks:
        raise CommandFailed(f"{data}: no block device under it")
    return disks[0]


def disk_read_bytes(device: str) -> int:
    for line in Path("/proc/diskstats").read_text().splitlines():
        f = line.split()
        if f[2] == device:
            return int(f[5]) * 512  # sectors read
    return 0


def run_backlog(plan: BacklogPlan, say) -> dict:
    if os.geteuid() != 0:
        raise CommandFailed("the backlog test changes the disk's scheduler and drops the page "
                            "cache: run it as root")
    data = plan.data or Path(tempfile.mkdtemp(prefix="floodgate-backlog-"))
    data.mkdir(parents=True, exist_ok=True)
    device = data_device(data)
    names, before = offered(device)
    schedulers = plan.schedulers or names
    if unknown := [s for s in schedulers if s not in names]:
        raise CommandFailed(f"{device} offers {', '.join(names)}, not {', '.join(unknown)}")
    fill = _fill(plan, data, say)
    for sched in schedulers:
        say(f"{sched}: a sync-flush broker over the backlog, caches dropped")
        plan.runs.append(_under(plan, data, device, sched))
        say(f"{sched}: send p99 {plan.runs[-1]['send_p99_ms']:.1f} ms, consumers "
            f"{plan.runs[-1]['consume_mb_s']:.0f} MB/s ({plan.runs[-1]['disk_read_mb_s']:.0f} "
            "MB/s from the disk)")
    doc = {"device": device, "scheduler_before": before, "fill": fill, "size": plan.size,
           "queues": plan.queues, "seconds": plan.seconds, "runs": plan.runs,
           "best": best(plan.runs)}
    plan.out.mkdir(parents=True, exist_ok=True)
    from broker_core.fsutil import write_json_atomic

    write_json_atomic(plan.out / "backlog.json", doc)
    remember(device, doc, plan.state_file)
    _page_again(plan.out, doc)
    return doc


def _page_again(out: Path, backlog: dict) -> None:
    """The grid's page, with this backlog test (a page of its own when no grid was)."""
    from broker_core.fsutil import atomic_write
    from console.measure.grid_run import host, read_json
    from console.measure.page import render

    doc = read_json(out / "cells.json") or {"host": host(), "sla_p99_ms": 20.0,
                                            "step_s": 0.0, "seconds": 0.0, "cells": []}
    atomic_write(out / "capacity-measure.html", render({**doc, "backlog": backlog}).encode())


def remember(device: str, doc: dict, path: Path | None = None) -> None:
    """Where `floodgate tune plan` reads it (`path`, default /var/lib/floodgate/...): its
    scheduler's reason is this measurement."""
    from datetime import date

    from broker_core.fsutil import write_json_atomic
    from kernel_tuning.plugins.scheduler import MEASURED

    path = path or Path("/") / MEASURED
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    known[device] = {"date": date.today().isoformat(), "size": doc["size"],
                     "runs": doc["runs"], "best": doc["best"]}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, known)


def best(runs: list[dict]) -> str | None:
    """The scheduler with the lowest send p99 among those whose consumers kept 100 MB/s
    (the issue's bar), else of all; a tie (p99s are histogram buckets) goes to the one
    that sent the most."""
    fast = [r for r in runs if r["consume_mb_s"] >= 100] or runs
    return min(fast, key=lambda r: (r["send_p99_ms"], -r["send_tps"]))["scheduler"] \
        if fast else None


def _fill(plan: BacklogPlan, data: Path, say) -> dict:
    count = int(plan.backlog_gib * (1 << 30) / plan.size)
    say(f"writing the backlog: {count:,} messages of {plan.size} B "
        f"({plan.backlog_gib:g} GiB) over {plan.queues} queues")
    c = Cluster(1, free_port_range(2), data, flush="async", segment_size=plan.segment)
    c.up(timeout=60)
    try:
        entry = c.file.brokers[0]
        admin.topic(entry.http, "POST", {"topic": TOPIC, "queues": plan.queues}, timeout=120)
        t0 = time.monotonic()
        out = _produce(entry.addr, ["--count", str(count), "--concurrency", "64"], plan.size)
        took = time.monotonic() - t0
    finally:
        c.down(grace=30)
    return {"messages": out["acked"], "errors": out["errors"], "seconds": round(took, 1),
            "mb_s": round(out["acked"] * plan.size / took / 1e6, 1)}


def _under(plan: BacklogPlan, data: Path, device: str, sched: str) -> dict:
    state = Path(tempfile.mkdtemp(prefix="floodgate-backlog-tune-"))
    _tune(["apply", "--profile-dir", str(_profile(state, sched)), "--profile",
           f"backlog-{sched}", "--device", device, "--state-dir", str(state / "journal")])
    try:
        subprocess.run(["sync"], check=False)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        in_use = offered(device)[1]  # what the kernel says it applied
        # fresh ports each start: ports left free between two starts are another's to take
        c = Cluster(1, free_port_range(2), data, flush="sync", segment_size=plan.segment)
        c.up(timeout=120)
        try:
            return {**_measure(plan, c, device, sched), "in_use": in_use}
        finally:
            c.down(grace=30)
    finally:
        if any((state / "journal").glob("*.json")):  # (none: nothing was changed)
            # a failed rollback keeps its journal: `floodgate tune rollback --state-dir`
            _tune(["rollback", "--state-dir", str(state / "journal")])
        shutil.rmtree(state, ignore_errors=True)


def _measure(plan: BacklogPlan, c: Cluster, device: str, sched: str) -> dict:
    entry = c.file.brokers[0]
    watch = BrokerWatch(c.procs[entry.name].pid, entry.http)
    group = f"backlog-{sched}-{int(time.time())}"
    # readers and producer start together; the window opens once the readers have joined
    start_at = float(int(time.time() + 3))
    opens = start_at + JOIN_S
    readers = [subprocess.Popen([sys.executable, "-m", "console.measure.subscriber",
                                 entry.addr, TOPIC, group, repr(start_at)],
                                stdout=subprocess.DEVNULL) for _ in range(plan.consumers)]
    try:
        prod = subprocess.Popen(
            produce_argv(entry.addr, TOPIC, plan.size, "--concurrency", str(plan.inflight),
                         "--duration", f"{plan.seconds + JOIN_S + 1:g}", "--start-at",
                         repr(start_at)), stdout=subprocess.PIPE, text=True)
        time.sleep(max(0.0, opens + 0.5 - time.time()))
        a, disk_a = watch.sample(time.monotonic()), disk_read_bytes(device)
        time.sleep(max(0.0, opens + 0.5 + int(plan.seconds) - time.time()))
        b, disk_b = watch.sample(time.monotonic()), disk_read_bytes(device)
        out = json.loads(prod.communicate(timeout=plan.seconds + 120)[0])
    finally:
        for r in readers:
            r.terminate()
        for r in readers:
            r.wait(10)
    fig = between(a, b)
    return {"scheduler": sched, "sent": out["acked"], "errors": out["errors"],
            "send_tps": round(out["tps"], 1),
            "send_avg_ms": round((out.get("mean_s") or 0) * 1000, 2),
            "send_p99_ms": round((out.get("p99_s") or 0) * 1000, 2),
            "send_max_ms": round((out.get("max_s") or 0) * 1000, 2),
            "consume_tps": round(fig["sub_tps"], 1), "consume_mb_s": round(fig["net_out_mb"], 1),
            "disk_read_mb_s": round((disk_b - disk_a) / fig["seconds"] / 1e6, 1),
            "iowait_pct": round(fig["iowait_pct"], 2), "load": round(fig["load"], 2)}


def _produce(addr: str, extra: list[str], size: int) -> dict:
    p = subprocess.run(produce_argv(addr, TOPIC, size, *extra), capture_output=True, text=True)
    if p.returncode != 0:
        raise CommandFailed(f"bench produce: {p.stderr.strip()[-300:]}")
    return json.loads(p.stdout)


def _profile(state: Path, sched: str) -> Path:
    d = state / "profiles"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"backlog-{sched}.toml").write_text(
        f'description = "capacity backlog: the data disk under {sched}"\n\n[scheduler]\n'
        f'"data_disk" = {{ value = "{sched}", reason = "capacity backlog test: measured '
        f'under {sched}" }}\n')
    return d


def _tune(argv: list[str]) -> None:
    p = subprocess.run([sys.executable, "-m", "console.cli", "tune", *argv],
                       capture_output=True, text=True)
    if p.returncode != 0:
        where = f" (its journal: {argv[-1]})" if argv[0] == "rollback" else ""
        raise CommandFailed(f"floodgate tune {argv[0]}{where}: {p.stderr.strip()[-300:]}")
