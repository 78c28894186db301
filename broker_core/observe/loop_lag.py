"""How late the broker's event loop runs: the time a request waits before the
broker even reads it (its service time starts only then).

A timer measures its own lateness: the loop was blocked (a long callback, the
garbage collector, the process waiting for a core) for that long, and every
request that arrived meanwhile waited too. The probe beats every `interval_s`
only while there is work: each read from a client `poke`s it, and a beat with
no poke since the last one is the last until the next poke. An idle broker
wakes for none (40 beats a second were most of its CPU). The broker's timed
jobs (`broker_core.deadline`) report their lateness here as well. The worst
lateness of each second is kept for a minute, for /stats and /metrics.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

INTERVAL_S = 0.025
KEEP_S = 60


class LoopLag:
    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 interval_s: float = INTERVAL_S) -> None:
        self._clock = clock
        self.interval_s = interval_s
        self._second = -1
        self._worst = 0.0  # of the current second
        self._kept: deque[tuple[int, float]] = deque(maxlen=KEEP_S)  # (second, its worst)
        self.late_total = 0  # samples later than 2 intervals
        self.beats = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._poked = False

    def sample(self, late: float) -> float:
        """Record that something on the loop ran `late` seconds after its time."""
        second = int(self._clock())
        if second != self._second:
            if self._second >= 0 and self._worst > 0:
                self._kept.append((self._second, self._worst))
            self._second, self._worst = second, 0.0
        if late > self._worst:
            self._worst = late
        if late > 2 * self.interval_s:
            self.late_total += 1
        return late

    def worst(self, seconds: int) -> float:
        """The longest the loop was late in the last `seconds` seconds (the current one too)."""
        since = int(self._clock()) - seconds
        current = self._worst if self._second > since else 0.0
        return max([current, *(w for s, w in self._kept if s > since)])

    # -- the probe ---------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop or asyncio.get_running_loop()
        self.poke()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle, self._loop = None, None

    def poke(self) -> None:
        """There is work: make sure a beat is armed (called on every read; cheap)."""
        self._poked = True
        if self._handle is None and self._loop is not None:
            self._arm()

    def _arm(self) -> None:
        self._poked = False
        self._due = self._clock() + self.interval_s
        self._handle = self._loop.call_later(self.interval_s, self._beat)

    def _beat(self) -> None:
        self.beats += 1
        self.sample(max(0.0, self._clock() - self._due))
        if self._poked:
            self._arm()
        else:
            self._handle = None
