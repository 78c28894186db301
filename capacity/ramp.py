"""A cell's ramp: producer concurrency raised step by step until the SLA or the
throughput says stop, and the knee read off the steps.

Concurrency doubles from 1 (1, 2, 4, ...: the USL's curve is read in its bend, and
each step costs the same time). The ramp stops at the first of:

- the step's send p99 past the SLA (20 ms, the Double-11 max): past the knee;
- throughput that stopped rising: two steps in a row each under FLAT (5 %) above
  the best before them (one flat step can be noise on a shared host);
- sends failing: more than FAILING (1 %) of a step's sends;
- the concurrency cap or the cell's time budget (a clock the caller injects).

The knee is the step of highest send TPS whose p99 is within the SLA and whose
sends did not fail: what one broker carries at this cell within the promise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

from capacity.errors import CapacityError
from capacity.usl import USLFit, fit_usl

SLA_P99_MS = 20.0
FLAT = 0.05
FAILING = 0.01


@dataclass(frozen=True)
class Step:
    """What one step of a ramp measured (figures of the broker's host and process)."""

    concurrency: int
    seconds: float
    sent: int
    errors: int
    send_tps: float
    avg_ms: float
    p99_ms: float
    max_ms: float
    stored_tps: float = 0.0  # what the broker counted stored over the step's window
    sub_tps: float = 0.0
    load: float = 0.0  # 1-minute load average at the step's end
    iowait_pct: float = 0.0  # of the host's CPU time over the step
    net_in_mb: float = 0.0  # MB/s into the broker (message bytes stored)
    net_out_mb: float = 0.0  # MB/s out (bytes delivered by pulls)
    cpu_us_per_msg: float = 0.0  # the broker's CPU a message stored
    broker_cores: float = 0.0
    peak_rss_mib: float = 0.0  # the broker's

    @property
    def failing(self) -> bool:
        return self.errors > FAILING * max(1, self.sent + self.errors)

    def within(self, sla_ms: float = SLA_P99_MS) -> bool:
        return self.p99_ms <= sla_ms and not self.failing and self.send_tps > 0

    def to_dict(self) -> dict:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


def concurrencies(cap: int) -> list[int]:
    """1, 2, 4, ... up to `cap` (and `cap` itself last when it is not a power of two)."""
    if cap < 1:
        raise CapacityError(f"a ramp's concurrency cap of {cap}: want 1 or more")
    out = [1 << i for i in range(int(math.log2(cap)) + 1)]
    return out if out[-1] == cap else [*out, cap]


def stop_reason(steps: list[Step], sla_ms: float = SLA_P99_MS) -> str | None:
    """Why the ramp stops after `steps` (the last one just measured), or None."""
    if not steps:
        return None
    last = steps[-1]
    if last.failing:
        return f"sends failing ({last.errors} of {last.sent + last.errors})"
    if last.p99_ms > sla_ms:
        return f"send p99 {last.p99_ms:.1f} ms past the SLA ({sla_ms:g} ms)"
    if len(steps) >= 3:
        best = max(steps[:-2], key=lambda s: s.send_tps)
        if all(s.send_tps < best.send_tps * (1 + FLAT) for s in steps[-2:]):
            return (f"throughput stopped rising: {best.send_tps:,.0f} msgs/s at "
                    f"{best.concurrency} in flight, not passed by {FLAT:.0%} in two steps")
    return None


def ramp(run_step: Callable[[int], Step], cap: int = 256, sla_ms: float = SLA_P99_MS,
         budget_s: float = math.inf, clock: Callable[[], float] | None = None
         ) -> tuple[list[Step], str]:
    """Run steps of rising concurrency (`run_step(n)`) until a stop rule holds: the steps
    and why it stopped. `budget_s` by `clock`: no step starts after it is spent."""
    import time

    clock = clock or time.monotonic
    start = clock()
    steps: list[Step] = []
    for n in concurrencies(cap):
        if clock() - start >= budget_s:
            return steps, f"the cell's time budget ({budget_s:g} s) spent"
        steps.append(run_step(n))
        if (why := stop_reason(steps, sla_ms)) is not None:
            return steps, why
    return steps, f"the concurrency cap ({cap}) reached"


def knee(steps: list[Step], sla_ms: float = SLA_P99_MS) -> Step | None:
    """The step of highest send TPS within the SLA with its sends not failing, or None."""
    good = [s for s in steps if s.within(sla_ms)]
    return max(good, key=lambda s: s.send_tps) if good else None


def usl(steps: list[Step]) -> USLFit | None:
    """The USL fitted to the steps that sent (None: fewer than 3 distinct levels)."""
    pts = [(s.concurrency, s.send_tps) for s in steps if s.send_tps > 0]
    if len({n for n, _x in pts}) < 3:
        return None
    try:
        return fit_usl([n for n, _x in pts], [x for _n, x in pts])
    except CapacityError:
        return None
