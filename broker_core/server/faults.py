"""Fault injection for drills: added write latency, PageCache-like stalls,
errors and pauses, on the broker's injected clock.

A stall pattern repeats every ``stall_every_s`` seconds: for the first
``stall_ms`` of each period every write waits until the stall ends, the way
a PageCache stall in the Double-11 talk's heatmap holds every send behind it. With
``stall_random`` each period draws its stall from 200-2000 ms instead.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class FaultSpec:
    latency_ms: float = 0.0  # added to every write
    stall_ms: float = 0.0  # stall length per period (or upper bound with stall_random)
    stall_every_s: float = 0.0  # period of the stall pattern; 0 = no stalls
    stall_random: bool = False  # draw each stall from [200 ms, stall_ms or 2000 ms]
    error_rate: float = 0.0  # share of sends answered SYSTEM_ERROR
    pause_s: float = 0.0  # hold every request this long from injection time
    duration_s: float | None = None  # clear by itself after this long

    def validate(self) -> FaultSpec:
        for name, value in asdict(self).items():  # JSON gives strings and bools too
            if name == "stall_random":
                if not isinstance(value, bool):
                    raise ValueError(f"stall_random must be true or false, not {value!r}")
            elif value is not None and (isinstance(value, bool)
                                        or not isinstance(value, int | float)
                                        or not math.isfinite(value)):
                raise ValueError(f"{name} must be a finite number, not {value!r}")
        checks = [
            (self.latency_ms >= 0, "latency_ms must be >= 0"),
            (self.stall_ms >= 0, "stall_ms must be >= 0"),
            (self.stall_every_s >= 0, "stall_every_s must be >= 0"),
            (not self.stall_ms or self.stall_every_s > 0, "stall_ms needs stall_every_s > 0"),
            (
                self.stall_ms <= self.stall_every_s * 1000 or not self.stall_ms,
                "a stall cannot be longer than its period",
            ),
            (0.0 <= self.error_rate <= 1.0, "error_rate must be in [0, 1]"),
            (self.pause_s >= 0, "pause_s must be >= 0"),
            (self.duration_s is None or self.duration_s > 0, "duration_s must be > 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        return self


class Faults:
    """The broker's active fault plan. Not thread-safe: used on the loop thread."""

    def __init__(self, clock: Callable[[], float], seed: int | None = None) -> None:
        self._clock = clock
        self._rng = random.Random(seed)
        self.spec = FaultSpec()
        self.any = False  # cheap hot-path test: is any fault set (even if expired)?
        self._since = 0.0
        self._period = -1
        self._period_stall_s = 0.0

    def inject(self, spec: FaultSpec) -> None:
        self.spec = spec.validate()
        self.any = spec != FaultSpec()
        self._since = self._clock()
        self._period = -1

    def clear(self) -> None:
        self.spec = FaultSpec()
        self.any = False

    def _expired(self, now: float) -> bool:
        d = self.spec.duration_s
        if d is not None and now - self._since >= d:
            self.clear()
            return True
        return False

    @property
    def active(self) -> bool:
        return self.spec != FaultSpec() and not self._expired(self._clock())

    def describe(self) -> dict:
        now = self._clock()
        if not self.active:
            return {"active": False}
        out = {"active": True, **asdict(self.spec), "since_s": now - self._since}
        if self.spec.duration_s is not None:
            out["remaining_s"] = max(0.0, self.spec.duration_s - (now - self._since))
        return out

    def pause_left(self) -> float:
        now = self._clock()
        if self._expired(now) or not self.spec.pause_s:
            return 0.0
        return max(0.0, self._since + self.spec.pause_s - now)

    def write_delay(self) -> float:
        """Seconds the next write must wait: fixed latency plus the stall left."""
        now = self._clock()
        if self._expired(now):
            return 0.0
        spec = self.spec
        delay = spec.latency_ms / 1000.0
        if spec.stall_ms and spec.stall_every_s:
            elapsed = now - self._since
            period = int(elapsed // spec.stall_every_s)
            if period != self._period:
                self._period = period
                top = spec.stall_ms / 1000.0
                self._period_stall_s = (
                    self._rng.uniform(min(0.2, top), top) if spec.stall_random else top
                )
            into = elapsed - period * spec.stall_every_s
            if into < self._period_stall_s:
                delay += self._period_stall_s - into
        return delay

    def should_error(self) -> bool:
        if not self.spec.error_rate or self._expired(self._clock()):
            return False
        return self._rng.random() < self.spec.error_rate
