"""How late the broker's event loop runs: the time a request waits before the
broker even reads it (its service time starts only then).

A timer every `interval_s` measures its own lateness: the loop was blocked
(a long callback, the garbage collector, the process waiting for a core)
for that long, and every request that arrived meanwhile waited too. The
worst lateness of each second is kept for a minute, for /stats and /metrics.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

INTERVAL_S = 0.025  # 40 wake-ups a second: what an idle broker spends most of its CPU on
KEEP_S = 60


class LoopLag:
    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 interval_s: float = INTERVAL_S) -> None:
        self._clock = clock
        self.interval_s = interval_s
        self._last: float | None = None
        self._second = -1
        self._worst = 0.0  # of the current second
        self.seconds: deque[float] = deque(maxlen=KEEP_S)  # worst of each closed second
        self.late_total = 0  # beats later than 2 intervals

    def beat(self) -> float:
        now = self._clock()
        late = 0.0 if self._last is None else max(0.0, now - self._last - self.interval_s)
        self._last = now
        second = int(now)
        if second != self._second:
            if self._second >= 0:
                self.seconds.append(self._worst)
            self._second, self._worst = second, 0.0
        self._worst = max(self._worst, late)
        if late > 2 * self.interval_s:
            self.late_total += 1
        return late

    def worst(self, seconds: int) -> float:
        """The longest the loop was late in the last `seconds` seconds (the current one too)."""
        recent = list(self.seconds)[-seconds:] if seconds > 1 else []
        return max([self._worst, *recent])

    async def run(self) -> None:
        """Beat every interval until cancelled: a timer callback, not a task that
        sleeps (100 task wake-ups a second were most of an idle broker's CPU)."""
        loop = asyncio.get_running_loop()
        handle = None

        def beat() -> None:
            nonlocal handle
            self.beat()
            handle = loop.call_later(self.interval_s, beat)

        handle = loop.call_later(self.interval_s, beat)
        try:
            await asyncio.Event().wait()  # until cancelled
        finally:
            handle.cancel()
