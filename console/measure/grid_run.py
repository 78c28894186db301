"""The grid measured: a broker per flush mode (started here, or one of a running
cluster's), each cell's ramp in turn, and what is done written after every cell, so
that Ctrl-C keeps it.

Written to `out`: `steps.csv` (every step of every cell), `cells.json` (each cell's
stop, knee and USL fit beside the talk's row, and the host), `load-test/*.csv` (a
cell's concurrency,throughput: `floodgate report capacity --load-test` reads one) and
`capacity-measure.html`.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from broker_core.client import admin
from broker_core.cluster.cluster_file import load_cluster
from broker_core.cluster.launcher import Cluster
from broker_core.cluster.ports import free_port_range
from broker_core.fsutil import atomic_write, write_json_atomic
from capacity.metaq2 import Cell, published_for
from capacity.ramp import SLA_P99_MS, Step
from console.errors import CommandFailed
from console.measure.cell_run import CellResult, Target, run_cell

STEP_FIELDS = list(Step.__dataclass_fields__)
SEGMENT = "1G"  # a 4 KiB cell stores ~100 MB/s: small segments would roll every second


@dataclass
class Plan:
    cells: list[Cell]
    out: Path
    step_s: float = 8.0
    cap: int = 256
    budget_s: float = 120.0
    sla_ms: float = SLA_P99_MS
    cluster: Path | None = None  # measure this running cluster's broker instead
    broker: str | None = None
    results: list[CellResult] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    started: float = field(default_factory=time.time)


def measure(plan: Plan, on_step: Callable[[Cell, Step], None],
            on_cell: Callable[[CellResult], None]) -> Plan:
    """Every cell of the plan measured (or skipped, with why); outputs after each."""
    plan.out.mkdir(parents=True, exist_ok=True)
    by_flush: dict[str, list[Cell]] = {}
    for cell in plan.cells:
        by_flush.setdefault(cell.flush, []).append(cell)
    try:
        if plan.cluster is not None:
            target = cluster_target(plan.cluster, plan.broker)
            for flush, cells in by_flush.items():
                if flush != target.flush:
                    plan.skipped += [{"label": c.label, "why": f"{target.name} flushes "
                                      f"{target.flush}"} for c in cells]
                    continue
                _cells(plan, target, cells, on_step, on_cell)
        else:
            for flush, cells in by_flush.items():
                with own_broker(flush) as target:
                    _cells(plan, target, cells, on_step, on_cell)
    finally:
        write_outputs(plan)
    return plan


def _cells(plan: Plan, target: Target, cells: list[Cell], on_step, on_cell) -> None:
    for cell in cells:
        result = run_cell(target, cell, plan.step_s, plan.cap, plan.budget_s,
                          lambda s, c=cell: on_step(c, s), plan.sla_ms)
        plan.results.append(result)
        write_outputs(plan)
        on_cell(result)


class own_broker:
    """A single broker flushing `flush`, started in a temporary directory and removed."""

    def __init__(self, flush: str) -> None:
        self.flush = flush
        self.tmp = Path(tempfile.mkdtemp(prefix=f"floodgate-measure-{flush}-"))
        self.cluster = Cluster(1, free_port_range(2), self.tmp / "cluster", flush=flush,
                               segment_size=SEGMENT)

    def __enter__(self) -> Target:
        self.cluster.up(timeout=60)
        b = self.cluster.file.brokers[0]
        return Target(b.name, b.addr, b.http, self.cluster.procs[b.name].pid, self.flush)

    def __exit__(self, *exc) -> None:
        try:
            self.cluster.down(grace=10)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


def cluster_target(path: Path, name: str | None) -> Target:
    """The named broker of a running cluster (default: its first), as /stats shows it."""
    spec = load_cluster(path)
    if spec.tls_ca or spec.credentials:
        raise CommandFailed(f"{path}: capacity measure runs against a cluster without TLS "
                            "and ACL (its own brokers by default: leave --cluster out)")
    brokers = {b.name: b for b in spec.brokers}
    entry = brokers.get(name) if name else spec.brokers[0]
    if entry is None:
        raise CommandFailed(f"{path}: no broker {name!r} (it has {', '.join(brokers)})")
    doc = admin.admin_call(entry.http, "/stats?history=0", "GET", None, None, 5.0)
    if not doc.get("pid") or not psutil.pid_exists(doc["pid"]):
        raise CommandFailed(f"{entry.name}: its process ({doc.get('pid')}) is not on this "
                            "host: a measurement reads the broker's CPU and memory here")
    return Target(entry.name, entry.addr, entry.http, int(doc["pid"]),
                  doc.get("flush_mode") or "async")


def host() -> dict:
    return {"cores": os.cpu_count() or 1, "memory_gib": round(psutil.virtual_memory().total
                                                            / (1 << 30), 1)}


def summary(plan: Plan) -> dict:
    cores = host()["cores"]
    cells = []
    for r in plan.results:
        row = r.to_dict()
        talk = published_for(r.cell)
        k = r.knee
        row["per_core_tps"] = round(k.send_tps / cores, 1) if k else None
        if talk is not None:
            row["metaq2"] = {"send_ms": talk.send_ms, "send_tps": talk.send_tps,
                             "sub_tps": talk.sub_tps, "per_core_tps": talk.send_tps_per_core}
            row["per_core_vs_metaq2"] = (round(k.send_tps / cores / talk.send_tps_per_core, 2)
                                         if k else None)
        cells.append(row)
    return {"host": host(), "sla_p99_ms": plan.sla_ms, "step_s": plan.step_s,
            "started": plan.started, "seconds": round(time.time() - plan.started, 1),
            "cells": cells, "skipped": plan.skipped, "backlog": read_json(
                plan.out / "backlog.json")}


def read_json(path: Path) -> dict | None:
    """A document written before (`capacity backlog`'s), or None."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@contextmanager
def interrupt_after():
    """Ctrl-C waits for the block (the outputs being written), then interrupts: an
    import or a file cut half-way lost what the cells done had measured."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    heard = []
    before = signal.signal(signal.SIGINT, lambda *_: heard.append(True))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
    if heard:
        raise KeyboardInterrupt


def write_outputs(plan: Plan) -> None:
    with interrupt_after():
        _write_outputs(plan)


def _write_outputs(plan: Plan) -> None:
    from console.measure.page import render

    doc = summary(plan)
    write_json_atomic(plan.out / "cells.json", doc)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["flush", "queues", "size", *STEP_FIELDS])
    for r in plan.results:
        for s in r.steps:
            d = s.to_dict()
            w.writerow([r.cell.flush, r.cell.queues, r.cell.size, *(d[f] for f in STEP_FIELDS)])
    atomic_write(plan.out / "steps.csv", buf.getvalue().encode())
    for r in plan.results:
        if r.steps:
            lines = ["concurrency,throughput"] + [f"{s.concurrency},{s.send_tps:.1f}"
                                                  for s in r.steps if s.send_tps > 0]
            (plan.out / "load-test").mkdir(exist_ok=True)
            atomic_write(plan.out / "load-test" / f"{load_test_name(r.cell)}.csv",
                         ("\n".join(lines) + "\n").encode())
    atomic_write(plan.out / "capacity-measure.html", render(doc).encode())


def load_test_name(cell: Cell) -> str:
    return f"{cell.flush}-{cell.size}b-{cell.queues}q"
