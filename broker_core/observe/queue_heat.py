"""Messages stored per queue, and the queues that run far hotter than the rest of
their broker (seed 004's 网红 queue: one user's or one key's traffic landing on one
queue, which then sets the broker's pace; the remedy is more queues for its topic,
or a better key).

Counting is one dict update per stored send; a baseline is copied every half
window (`tick`), and rates are taken when asked (once a second, for the snapshot):
a pass over the queues that stored anything.
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Callable
from dataclasses import dataclass

WINDOW_S = 10.0
HOT_FACTOR = 10.0  # a queue this many times the broker's median active queue is hot ...
HOT_MIN_RATE = 50.0  # ... when it carries at least this many messages a second ...
HOT_MIN_QUEUES = 4  # ... among at least this many active queues (fewer: no median to judge)

Queue = tuple[str, int]


@dataclass(frozen=True)
class QueueRate:
    topic: str
    queue: int
    rate: float  # messages stored per second over the last window
    times_median: float | None = None  # how many times the median active queue

    def to_dict(self) -> dict:
        return {"topic": self.topic, "queue": self.queue, "rate": round(self.rate, 2),
                "times_median": None if self.times_median is None
                else round(self.times_median, 1)}


class QueueHeat:
    """Rates are over the last `window_s` at most and half of it at least (two baselines
    taken half a window apart), so a queue's rate shows a second after it starts."""

    def __init__(self, clock: Callable[[], float], window_s: float = WINDOW_S) -> None:
        self._clock = clock
        self.window_s = window_s
        self.counts: dict[Queue, int] = {}
        now = clock()
        self._base: dict[Queue, int] = {}  # counts when the rates' span began
        self._base_at = now
        self._next: dict[Queue, int] = {}  # the next base, half a window younger
        self._next_at = now

    def hit(self, topic: str, queue: int, n: int = 1) -> None:
        key = (topic, queue)
        self.counts[key] = self.counts.get(key, 0) + n

    def tick(self) -> bool:
        """Move the span on once half a window passed; True if it did."""
        now = self._clock()
        if now - self._next_at < self.window_s / 2:
            return False
        self._base, self._base_at = self._next, self._next_at
        self._next, self._next_at = dict(self.counts), now
        return True

    def rates(self) -> dict[Queue, float]:
        """Messages a second of each queue that stored any over the span."""
        dt = self._clock() - self._base_at
        if dt <= 0:
            return {}
        base = self._base
        return {q: (n - base.get(q, 0)) / dt for q, n in self.counts.items()
                if n != base.get(q, 0)}

    def forget_topic(self, topic: str) -> None:
        for table in (self.counts, self._base, self._next):
            for key in [k for k in table if k[0] == topic]:
                del table[key]

    def hottest(self, limit: int = 20, rates: dict[Queue, float] | None = None
                ) -> list[QueueRate]:
        rates = self.rates() if rates is None else rates
        med = statistics.median(rates.values()) if rates else 0.0
        top = heapq.nlargest(limit, rates.items(), key=lambda kv: kv[1])
        return [QueueRate(t, q, r, r / med if med else None) for (t, q), r in top]

    def hot(self, rates: dict[Queue, float] | None = None) -> list[QueueRate]:
        """The queues far hotter than the broker's median active queue, hottest first."""
        rates = self.rates() if rates is None else rates
        if len(rates) < HOT_MIN_QUEUES:
            return []
        floor = max(HOT_MIN_RATE, HOT_FACTOR * statistics.median(rates.values()))
        return [r for r in self.hottest(10, rates) if r.rate >= floor]

    def report(self, depth: Callable[[str, int], int], limit: int = 10) -> list[dict]:
        """The hottest queues, hottest first: {topic, queue, rate, times_median, depth
        (messages held), hot (far hotter than the broker's median active queue)}."""
        rates = self.rates()
        hot = {(r.topic, r.queue) for r in self.hot(rates)}
        return [{**r.to_dict(), "depth": depth(r.topic, r.queue),
                 "hot": (r.topic, r.queue) in hot} for r in self.hottest(limit, rates)]
