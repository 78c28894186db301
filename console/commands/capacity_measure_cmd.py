"""`floodgate capacity measure`: the capacity grid measured (console.measure)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from console.commands.common import AT_LEAST_1, POSITIVE, add_subparser, checked, number
from console.errors import UsageError

QUICK = {"step_s": 4.0, "cap": 128, "budget_s": 75.0}  # the talk's ten cells: ~9 min


def add_measure(models) -> None:
    p = add_subparser(
        models, "measure", "measure each cell of a capacity grid on real brokers",
        epilog="By default the Taobao talk's MetaQ 2.0 grid (async and sync flush; 128 B to "
        "4 KiB on 1,024 queues, 512 B on 10,240), each on a broker started for it. Each cell "
        "ramps the producer's requests in flight (1, 2, 4, ...) until the send p99 passes the "
        "SLA or throughput stops rising; its knee is the best step within the SLA. Ctrl-C "
        "keeps the cells done.")
    p.add_argument("--cluster", type=Path, help="measure a running cluster's broker instead "
                   "(its flush mode: cells of the other are skipped)")
    p.add_argument("--broker", help="with --cluster: the broker (default: the first)")
    p.add_argument("--flush", type=_list(str), help="async,sync (default: the talk's cells)")
    p.add_argument("--sizes", type=_list(_size), help="message sizes, e.g. 128,2k")
    p.add_argument("--queues", type=_list(int), help="queue counts, e.g. 1024")
    p.add_argument("--quick", action="store_true",
                   help=f"steps of {QUICK['step_s']:g} s, at most {QUICK['cap']} in flight, "
                   f"{QUICK['budget_s']:g} s a cell")
    number(p, "--step-s", POSITIVE, default=None, help="seconds of sending a step (8)")
    number(p, "--max-concurrency", AT_LEAST_1, type=int, default=None,
           help="requests in flight at most (256)")
    number(p, "--cell-budget-s", POSITIVE, default=None,
           help="no step of a cell starts past this (120)")
    number(p, "--sla-ms", POSITIVE, default=20.0, help="send p99 a knee keeps within (20)")
    p.add_argument("--out", type=Path, default=Path("capacity-measure"),
                   help="where the table, steps, load-test CSVs and page go")
    p.add_argument("--json", action="store_true", help="print the cells as JSON at the end")
    p.set_defaults(func=checked(run_measure))


def add_backlog(models) -> None:
    p = add_subparser(
        models, "backlog", "consumers catching up from disk under each I/O scheduler (root)",
        epilog="The Taobao talk's backlog test: a backlog written first, then under each "
        "scheduler the data disk offers (set through `floodgate tune apply`, rolled back "
        "after), the page cache dropped and a broker flushing sync over it, consumers read "
        "from the first message while a producer sends. Writes backlog.json to --out.")
    number(p, "--backlog-gib", POSITIVE, default=None,
           help="GiB written before (default: 1.1 x this host's memory, more than its page "
           "cache holds)")
    p.add_argument("--size", type=_size, default=4096, help="message bytes (4k, the talk's)")
    number(p, "--queues", AT_LEAST_1, type=int, default=1024, help="queues (1024)")
    number(p, "--seconds", POSITIVE, default=30.0, help="measured under each scheduler (30)")
    number(p, "--consumers", AT_LEAST_1, type=int, default=None,
           help="consumer processes (default: half the cores, at least 1: they share the "
           "broker's host, where the talk's ran apart; on 2 cores 4 of them read 300 MB/s "
           "and starved the broker: sends p99 125-297 ms, against 13 ms with 1)")
    number(p, "--inflight", AT_LEAST_1, type=int, default=8, help="sends in flight (8)")
    p.add_argument("--schedulers", type=_list(str), help="default: every one the disk offers")
    p.add_argument("--data", type=Path, help="the store, on the disk under test (default: a "
                   "temporary directory, removed)")
    p.add_argument("--out", type=Path, default=Path("capacity-measure"))
    p.add_argument("--state-file", type=Path, default=None,
                   help="where `floodgate tune plan` reads the measurement (default "
                   "/var/lib/floodgate/scheduler-measured.json)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=checked(run_backlog_cmd))


def run_backlog_cmd(args) -> int:
    import shutil
    import tempfile

    import psutil

    from console.measure.backlog import BacklogPlan, run_backlog

    gib = args.backlog_gib or round(1.1 * psutil.virtual_memory().total / (1 << 30), 1)
    data = args.data or Path(tempfile.mkdtemp(prefix="floodgate-backlog-"))
    plan = BacklogPlan(args.out, size=args.size, queues=args.queues, backlog_gib=gib,
                       seconds=args.seconds, inflight=args.inflight,
                       consumers=args.consumers or max(1, (os.cpu_count() or 2) // 2),
                       schedulers=args.schedulers, data=data, state_file=args.state_file)
    try:
        doc = run_backlog(plan, lambda text: print(text, file=sys.stderr, flush=True))
    finally:
        if args.data is None:
            shutil.rmtree(data, ignore_errors=True)
    if args.json:
        from console.commands.common import print_json

        print_json(doc)
        return 0
    print(f"{'scheduler':<12} {'send p99':>9} {'max':>7} {'sends/s':>8} {'read MB/s':>10} "
          f"{'from disk':>10} {'iowait %':>9}")
    for r in doc["runs"]:
        print(f"{r['scheduler']:<12} {r['send_p99_ms']:>7.1f}ms {r['send_max_ms']:>5.0f}ms "
              f"{r['send_tps']:>8,.0f} {r['consume_mb_s']:>10.0f} {r['disk_read_mb_s']:>10.0f} "
              f"{r['iowait_pct']:>9.1f}")
    print(f"best on this disk ({doc['device']}): {doc['best']}")
    return 0


def _size(text: str) -> int:
    t = text.strip().lower().removesuffix("b")
    mult = 1024 if t.endswith("k") else 1
    return int(float(t.removesuffix("k")) * mult)


def _list(each):
    def parse(text: str) -> list:
        try:
            out = [each(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: want a comma-separated list") from None
        if not out:
            raise argparse.ArgumentTypeError("an empty list")
        return out
    return parse


def run_measure(args) -> int:
    from capacity.errors import CapacityError
    from capacity.metaq2 import grid
    from console.measure.grid_run import Plan, measure

    try:
        cells = grid(args.flush, args.sizes, args.queues)
    except CapacityError as exc:
        raise UsageError(str(exc)) from None
    q = QUICK if args.quick else {"step_s": 8.0, "cap": 256, "budget_s": 120.0}
    plan = Plan(cells, args.out, step_s=args.step_s or q["step_s"],
                cap=args.max_concurrency or q["cap"],
                budget_s=args.cell_budget_s or q["budget_s"], sla_ms=args.sla_ms,
                cluster=args.cluster, broker=args.broker)
    progress = Progress(len(cells))
    signal.signal(signal.SIGTERM, _interrupted)  # as Ctrl-C: brokers stopped, cells kept
    try:
        measure(plan, progress.step, progress.cell)
    except KeyboardInterrupt:
        progress.close()
        print(f"stopped: {len(plan.results)} of {len(cells)} cells kept in {args.out}",
              file=sys.stderr)
        return 130
    progress.close()
    if args.json:
        from console.commands.common import print_json
        from console.measure.grid_run import summary

        print_json(summary(plan))
    else:
        print_table(plan)
    print(f"written: {args.out}/capacity-measure.html, cells.json, steps.csv, load-test/",
          file=sys.stderr)
    return 0


def _interrupted(*_) -> None:
    raise KeyboardInterrupt


class Progress:
    """A bar on a terminal (rich), a line a step elsewhere."""

    def __init__(self, cells: int) -> None:
        self.cells, self.done = cells, 0
        self.bar = None
        if sys.stderr.isatty():
            from rich.progress import Progress as Bar

            self.bar = Bar(transient=True)
            self.task = self.bar.add_task("capacity", total=cells)
            self.bar.start()

    def step(self, cell, s) -> None:
        text = (f"cell {self.done + 1}/{self.cells} {cell.label}: {s.concurrency} in flight, "
                f"{s.send_tps:,.0f} msgs/s, p99 {s.p99_ms:.1f} ms")
        if self.bar is not None:
            self.bar.update(self.task, description=text)
        else:
            print(text, file=sys.stderr, flush=True)

    def cell(self, _result) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def print_table(plan) -> None:
    from console.measure.grid_run import summary

    doc = summary(plan)
    print(f"{'cell':<22} {'knee':>5} {'send/s':>9} {'sub/s':>9} {'p99 ms':>7} "
          f"{'/core':>8} {'MetaQ/core':>10} {'x':>5}  stopped")
    for c in doc["cells"]:
        k = c["knee"] or {}
        talk = c.get("metaq2") or {}
        ratio = c.get("per_core_vs_metaq2")
        print(f"{c['label']:<22} {k.get('concurrency', '-'):>5} "
              f"{k.get('send_tps', 0):>9,.0f} {k.get('sub_tps', 0):>9,.0f} "
              f"{k.get('p99_ms', 0):>7.2f} {c.get('per_core_tps') or 0:>8,.0f} "
              f"{talk.get('per_core_tps', 0):>10,.0f} {ratio if ratio else '-':>5}  "
              f"{c['stopped']}")
    for s in doc["skipped"]:
        print(f"{s['label']:<22} not measured: {s['why']}")
