"""What the fuse's tests share: a fuse of `n` brokers on a virtual clock, judged from its
first call, and the two slow calls that isolate a broker."""

from __future__ import annotations

from fuse import Fuse
from tests.clock import ManualClock


def names(n: int) -> list[str]:
    return [f"b{i}" for i in range(n)]


def slow(fuse: Fuse, broker: str, rt: float) -> None:
    """Two slow calls: what it takes (slow_calls = 2) to isolate for slowness."""
    fuse.report(broker, rt, ok=True)
    fuse.report(broker, rt, ok=True)


def make(n: int = 10, **kw) -> tuple[Fuse, ManualClock]:
    clock = ManualClock()
    kw.setdefault("seed", 7)
    kw.setdefault("warmup_calls", 0)  # judge from the first call (warm-up has its own test)
    kw.setdefault("warmup_s", 0)
    return Fuse(names(n), clock=clock, **kw), clock
