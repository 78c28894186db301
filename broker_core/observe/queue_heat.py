"""Messages stored per queue, and the queues that run far hotter than the other
queues of their topic (the Mogujie talk's 网红 queue: one user's or one key's traffic landing
on one queue, which then sets the pace of its consumer; the remedy is a better key,
or more queues for the topic). A busy topic among quiet ones is not hot: its queues
are compared with each other.

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
HOT_FACTOR = 10.0  # a queue this many times its topic's median queue here is hot ...
HOT_MIN_RATE = 50.0  # ... when it carries at least this many messages a second ...
HOT_MIN_QUEUES = 2  # ... in a topic of at least this many queues (one queue cannot be uneven)

Queue = tuple[str, int]


@dataclass(frozen=True)
class QueueRate:
    topic: str
    queue: int
    rate: float  # messages stored per second over the last window
    times_median: float | None = None  # how many times its topic's median queue (None: 0)

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

    def topic_rate(self, topic: str, queues: int) -> float:
        """Messages a second stored in `topic` (its `queues` queues) over the span."""
        dt = self._clock() - self._base_at
        if dt <= 0:
            return 0.0
        counts, base = self.counts, self._base
        return sum(counts.get((topic, q), 0) - base.get((topic, q), 0)
                   for q in range(queues)) / dt

    def forget_topic(self, topic: str) -> None:
        for table in (self.counts, self._base, self._next):
            for key in [k for k in table if k[0] == topic]:
                del table[key]

    def hottest(self, limit: int = 20, rates: dict[Queue, float] | None = None,
                queues_of: Callable[[str], int] | None = None) -> list[QueueRate]:
        """The fastest queues, each with how many times its topic's median queue it runs
        (`queues_of(topic)`: the topic's queues here, the idle ones counting as 0)."""
        rates = self.rates() if rates is None else rates
        top = heapq.nlargest(limit, rates.items(), key=lambda kv: kv[1])
        mine: dict[str, list[float]] = {t: [] for (t, _q), _r in top}
        for (t, _q), r in rates.items():  # one pass for every topic in the top
            if t in mine:
                mine[t].append(r)
        medians = {t: _median(rs, queues_of(t) if queues_of is not None else 0)
                   for t, rs in mine.items()}
        return [QueueRate(t, q, r, r / medians[t] if medians[t] else None)
                for (t, q), r in top]

    def hot(self, queues_of: Callable[[str], int], rates: dict[Queue, float] | None = None,
            top: list[QueueRate] | None = None) -> list[QueueRate]:
        """Queues far hotter than the other queues of their topic (the idle ones count),
        hottest first: one key's traffic landing on one queue. `top`: `hottest`'s answer
        of at least 10, when the caller has it."""
        if top is None:
            top = self.hottest(10, rates, queues_of)
        out = []
        for r in top[:10]:
            if r.rate < HOT_MIN_RATE or queues_of(r.topic) < HOT_MIN_QUEUES:
                continue
            if r.times_median is None or r.times_median >= HOT_FACTOR:
                out.append(r)  # None: its siblings all idle
        return out

    def report(self, depth: Callable[[str, int], int], queues_of: Callable[[str], int],
               limit: int = 10) -> list[dict]:
        """The hottest queues, hottest first: {topic, queue, rate, times_median (its
        topic's median queue), depth (messages held), hot}."""
        top = self.hottest(max(limit, 10), self.rates(), queues_of)
        hot = {(r.topic, r.queue) for r in self.hot(queues_of, top=top)}
        return [{**r.to_dict(), "depth": depth(r.topic, r.queue),
                 "hot": (r.topic, r.queue) in hot}
                for r in top[:limit]]


def _median(rates: list[float], queues: int) -> float:
    """The median of a topic's queues' rates, those not in `rates` (idle) as 0."""
    if not rates:
        return 0.0
    return statistics.median(rates + [0.0] * (max(len(rates), queues) - len(rates)))
