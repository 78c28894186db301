"""One cell of the grid measured on one broker: its topic made, a subscriber reading
everything, and a ramp of producer steps (`floodgate bench produce`, each in a
process of its own so that its GIL is not the measurement's).

A step's producer connects first and sends from an agreed instant (`--start-at`); the
broker and the host are sampled just before it and once the broker's counts of the
step have settled (it counts each second up to a second after it closes): its stored
and delivered messages and its CPU are the step's, per second of sending.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from broker_core.client import admin
from broker_core.server.topic_table import MAX_QUEUES
from capacity.metaq2 import Cell
from capacity.ramp import SLA_P99_MS, Step, knee, ramp, usl
from console.measure.host import BrokerWatch, between

START_S = 1.5  # a step's producer starts (imports, connects) within this
SETTLE_S = 3.0  # a broker counts a second up to a second or two after it closes


@dataclass(frozen=True)
class Target:
    """The broker a cell is measured on."""

    name: str
    addr: str
    http: str
    pid: int
    flush: str


@dataclass
class CellResult:
    cell: Cell
    steps: list[Step] = field(default_factory=list)
    stopped: str = ""
    seconds: float = 0.0
    sla_ms: float = SLA_P99_MS  # the knee's (`capacity measure --sla-ms`)

    @property
    def knee(self) -> Step | None:
        return knee(self.steps, self.sla_ms)

    def to_dict(self) -> dict:
        k, fit = self.knee, usl(self.steps)
        return {"flush": self.cell.flush, "queues": self.cell.queues, "size": self.cell.size,
                "label": self.cell.label, "stopped": self.stopped,
                "seconds": round(self.seconds, 1), "steps": [s.to_dict() for s in self.steps],
                "knee": k.to_dict() if k else None, "usl": fit.to_dict() if fit else None}


def topics_of(cell: Cell) -> dict[str, int]:
    """The cell's topics and their queues: one, or where the cell has more queues than a
    topic may (MAX_QUEUES, 1,024 a broker) as many as it takes, the queues shared evenly
    (the talk's 10,240 partitions: ten topics of 1,024)."""
    n = math.ceil(cell.queues / MAX_QUEUES)
    base = f"capacity-{cell.flush}-{cell.size}b-{cell.queues}q"
    if n == 1:
        return {base: cell.queues}
    return {f"{base}-{i}": cell.queues // n + (i < cell.queues % n) for i in range(n)}


def produce_argv(addr: str, topic: str, size: int, *flags: str) -> list[str]:
    """`floodgate bench produce` against one broker, no fuse, JSON out (`flags`: the
    load: --concurrency, --count or --duration, --start-at)."""
    return [sys.executable, "-m", "console.cli", "bench", "produce", "--brokers", addr,
            "--topic", topic, "--size", str(size), "--no-fuse", "--json", *flags]


def run_cell(target: Target, cell: Cell, step_s: float, cap: int, budget_s: float,
             on_step: Callable[[Step], None] = lambda _s: None,
             sla_ms: float = SLA_P99_MS) -> CellResult:
    """The cell's ramp on `target` (whose flush mode is the cell's)."""
    if target.flush != cell.flush:
        raise ValueError(f"{target.name} flushes {target.flush}, the cell {cell.flush}")
    topics = topics_of(cell)
    for topic, queues in topics.items():
        admin.topic(target.http, "POST", {"topic": topic, "queues": queues}, timeout=120)
    topic = ",".join(topics)  # the producer sends to each in turn, the subscriber reads all
    watch = BrokerWatch(target.pid, target.http)
    subscriber = subprocess.Popen([sys.executable, "-m", "console.measure.subscriber",
                                   target.addr, topic], stdout=subprocess.DEVNULL)
    result = CellResult(cell, sla_ms=sla_ms)
    began = time.monotonic()

    def step(n: int) -> Step:
        s = run_step(target, watch, topic, cell.size, n, step_s)
        on_step(s)
        return s

    try:
        warm_up(target, watch, topic, cell)
        result.steps, result.stopped = ramp(step, cap, sla_ms, budget_s)
    except KeyboardInterrupt:
        result.stopped = "stopped by the operator (Ctrl-C)"
        raise
    finally:
        result.seconds = time.monotonic() - began
        subscriber.terminate()
        subscriber.wait(10)
    return result


def warm_up(target: Target, watch: BrokerWatch, topic: str, cell: Cell) -> None:
    """Every queue written twice before the ramp, unmeasured: a queue's first write makes
    its ConsumeQueue's first extent, and at 10,240 queues the first steps measured that
    (1,000 msgs/s, 'stopped rising') instead of the broker's rate. Returns once the broker
    has counted them (else the first step's count held some)."""
    before = watch.sample(time.monotonic())
    p = subprocess.run(
        produce_argv(target.addr, topic, cell.size, "--concurrency", "64", "--count",
                     str(max(1000, 2 * cell.queues))),
        capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"the cell's warm-up failed: {p.stderr.strip()[-300:]}")
    settled(watch, before, _acked(p.stdout))


def settled(watch: BrokerWatch, a, acked: int):
    """The broker sampled once it has counted the step's `acked` messages (or SETTLE_S
    passed: a send acked and not counted is the broker's to explain, not a wait's)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        b = watch.sample(time.monotonic())
        if b.messages_in - a.messages_in >= acked or time.monotonic() >= deadline:
            return b
        time.sleep(0.1)


def _acked(out: str) -> int:
    try:
        return int(json.loads(out)["acked"])
    except (ValueError, KeyError, TypeError):
        return 0


def run_step(target: Target, watch: BrokerWatch, topic: str, size: int, n: int,
             step_s: float) -> Step:
    """`n` requests in flight for `step_s` seconds of sending."""
    start_at = time.time() + START_S
    prod = subprocess.Popen(
        produce_argv(target.addr, topic, size, "--concurrency", str(n), "--duration",
                     f"{step_s:g}", "--start-at", repr(start_at)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(max(0.0, start_at - 0.2 - time.time()))
        a = watch.sample(time.monotonic())
        out, err = prod.communicate(timeout=step_s + 120)
        b = settled(watch, a, _acked(out))
    except BaseException:
        prod.kill()
        prod.wait()
        raise
    try:
        doc = json.loads(out)
    except ValueError:
        raise RuntimeError(f"bench produce said: {err.strip()[-300:] or 'nothing'}") from None
    fig = between(a, b, doc["seconds"])

    def ms(key: str) -> float:
        return (doc.get(key) or 0.0) * 1000

    return Step(concurrency=n, seconds=doc["seconds"], sent=doc["acked"],
                errors=doc["errors"], send_tps=doc["tps"], avg_ms=ms("mean_s"),
                p99_ms=ms("p99_s"), max_ms=ms("max_s"), stored_tps=fig["stored_tps"],
                sub_tps=fig["sub_tps"],
                load=fig["load"], iowait_pct=fig["iowait_pct"], net_in_mb=fig["net_in_mb"],
                net_out_mb=fig["net_out_mb"], cpu_us_per_msg=fig["cpu_us_per_msg"],
                broker_cores=fig["broker_cores"], peak_rss_mib=watch.peak_rss_mib())
