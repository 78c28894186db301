"""Consumer backlog (堆积) judged per group, in LinkedIn Burrow's spirit.

The Taobao talk's problem: a consumer group that falls behind must be seen before
its backlog hurts anyone, and told apart from one that is merely busy. Each
tick the broker samples, per (group, topic, queue), the group's committed
offset and the queue's end; a queue's last `window` samples are judged:

- OK: no lag, or lag that is not growing;
- WARNING: the group moves, but since it last caught up (lag 0: Burrow's first
  rule) its lag never fell, grew in at least a third of the intervals, and that over
  at least `WARN_SAMPLES` samples: it consumes slower than producers write (a
  group keeping up at a low rate, lag 0 0 0 0 2, or a steady lag that ticks up once,
  3 3 3 3 4, is not behind);
- STALLED: the group is alive (heartbeats or commits) but its offset has not
  moved for `stall_polls` samples while messages waited the whole time (lag at
  the first of them: traffic that arrives in the last second is not a stall);
- STOPPED: lag, and nothing from the group (no commit, no heartbeat) for
  `stopped_after_s`: its consumers are gone.

Burrow has only offsets to go on and so needs a full window to call a stall;
the broker also sees heartbeats, so "alive but stuck" (STALLED) and "gone"
(STOPPED) are told apart within `stall_polls` samples. A group is judged the
same way on its offsets summed over its queues (its queues are shown each
with its own verdict); its time to drain is its lag over (consume rate -
write rate) when it is catching up, None when it is not, or when its lag is what it
consumes within a second (in flight: it is keeping up).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import NamedTuple

STATUSES = ("OK", "WARNING", "STALLED", "STOPPED")  # worse to the right
SEVERITY = {s: i for i, s in enumerate(STATUSES)}
WARN_SAMPLES = 5  # growing lag needs this many samples (5 s at one a second) to be a trend
MAX_QUEUE_ROWS = 200  # a group's queues listed in a report: those behind, the worst first
IN_FLIGHT_S = 1.0  # a lag consumed within this is in flight, not a backlog to drain
SAMPLE_STEP = 2000  # queues sampled between two yields of `sample_steps` (~3 ms here)


class Sample(NamedTuple):
    t: float  # seconds (the evaluator's clock)
    committed: int  # the group's next offset to consume
    end: int  # the queue's end offset (next to be written)

    @property
    def lag(self) -> int:
        return max(0, self.end - self.committed)


@dataclass(frozen=True, slots=True)
class Verdict:
    status: str
    lag: int
    trend_per_s: float  # lag change per second over the window (> 0: growing)
    consume_per_s: float
    produce_per_s: float
    drain_s: float | None  # None: not catching up, or keeping up (no lag: 0.0)


def judge(samples: Iterable[Sample], alive: bool, stall_polls: int = 2) -> Verdict:
    """One queue's verdict from its samples, oldest first (`alive`: the group was
    heard from within the stopped threshold)."""
    s = list(samples)
    if not s:
        return Verdict("OK", 0, 0.0, 0.0, 0.0, 0.0)
    last, first = s[-1], s[0]
    span = last.t - first.t
    consume = consume_rate(s)
    produce = (last.end - first.end) / span if span > 0 else 0.0
    lag = last.lag
    if lag == 0:  # caught up (most queues of a healthy group): no trend worth a fit
        return Verdict("OK", 0, 0.0, consume, produce, 0.0)
    trend = _slope([(x.t, x.lag) for x in s])
    drain = drain_time(lag, consume, produce)
    if not alive:
        status = "STOPPED"
    elif len(s) > stall_polls and _stuck(s[-stall_polls - 1:]):
        status = "STALLED"
    elif _falling_behind(s):
        status = "WARNING"
    else:
        status = "OK"
    return Verdict(status, lag, trend, consume, produce, drain)


def consume_rate(s: list[Sample]) -> float:
    """Offsets consumed per second over the samples, never negative: an interval in which
    the committed offset moved back is a reset (`floodgate offsets reset`, a rewind to
    re-consume), not consumption, so it is left out, its time with it; with no interval
    left the rate is not known and reads 0. (The net move over the window read
    "out -291/s" after a reset.)"""
    moved = elapsed = 0.0
    for a, b in pairwise(s):
        if b.committed >= a.committed:
            moved += b.committed - a.committed
            elapsed += b.t - a.t
    return moved / elapsed if elapsed > 0 else 0.0


def _stuck(window: list[Sample]) -> bool:
    """The offset did not move while messages waited the whole time: there was lag at the
    window's start. Without that, a queue whose traffic resumes in the last second (a
    broker back in the producers' routing) read STALLED for a group that had had nothing
    to consume: `make demo`'s billing, when the fuse let a broker's traffic back."""
    return window[0].lag > 0 and len({x.committed for x in window}) == 1


def _falling_behind(s: list[Sample]) -> bool:
    """Burrow's rules over the samples since the lag was last 0: never down (not a
    sawtooth's noise), and up in at least a third of the intervals (not one blip)."""
    since = next((i + 1 for i in range(len(s) - 1, -1, -1) if s[i].lag == 0), 0)
    tail = [x.lag for x in s[since:]]
    if len(tail) < WARN_SAMPLES:
        return False
    steps = list(pairwise(tail))
    return all(b >= a for a, b in steps) and 3 * sum(b > a for a, b in steps) >= len(steps)


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope; 0 for fewer than two distinct times."""
    n = len(points)
    if n < 2:
        return 0.0
    mt = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (y - my) for t, y in points) / den if den else 0.0


class BacklogEvaluator:
    """Per (group, topic, queue) sample windows and the verdicts over them."""

    def __init__(self, clock: Callable[[], float], window: int = 10, stall_polls: int = 2,
                 stopped_after_s: float = 10.0) -> None:
        self.clock = clock
        self.window, self.stall_polls, self.stopped_after_s = window, stall_polls, stopped_after_s
        # per queue, plain (t, committed, end) tuples: the collector stops tracking a
        # tuple of numbers, not a named tuple's (100,000 of them at 10,000 queues made
        # every full collection walk them: 30-80 ms of the broker's loop)
        self._samples: dict[tuple[str, str, int], deque[tuple[float, int, int]]] = {}
        self._groups: dict[str, deque[Sample]] = {}  # group -> its offsets summed per sample
        self._heard: dict[str, float] = {}  # group -> when last heard (commit or heartbeat)
        # from the last sample, so that a report reads only the queues behind
        self._behind: list[tuple[str, str, int]] = []
        self._queue_counts: dict[str, int] = {}
        self._topics: dict[str, dict[str, None]] = {}  # group -> its topics, in order

    def heard(self, group: str) -> None:
        self._heard[group] = self.clock()

    def sample(self, committed: Mapping[tuple[str, str, int], int],
               end_of: Callable[[str, int], int]) -> None:
        """Take one sample of every queue a group has committed on."""
        for _step in self.sample_steps(committed, end_of):
            pass

    def sample_steps(self, committed: Mapping[tuple[str, str, int], int],
                     end_of: Callable[[str, int], int], step: int = SAMPLE_STEP
                     ) -> Iterator[None]:
        """`sample`, yielding after every `step` queues (an event loop serves between);
        `committed` is copied first, and the sample counts once it is done."""
        now = self.clock()
        copied = dict(committed)  # (one object: a list of its items made 10,000 tuples)
        per_group: dict[str, list] = {}  # group -> [offsets summed, ends summed, queues, topics]
        behind = []
        samples = self._samples
        for i, (key, offset) in enumerate(copied.items(), 1):
            if not i % step:
                yield
            group, topic, qid = key
            window = samples.get(key)
            if window is None:
                window = samples[key] = deque(maxlen=self.window)
                self._heard.setdefault(group, now)  # known from its offsets: heard now
            end = end_of(topic, qid)
            window.append((now, offset, end))
            g = per_group.get(group)
            if g is None:  # (not setdefault: a list and a dict made per queue)
                g = per_group[group] = [0, 0, 0, {}]
            g[0] += offset
            g[1] += end
            g[2] += 1
            g[3][topic] = None
            if end > offset:
                behind.append(key)
        self._behind = sorted(behind)
        self._queue_counts = {group: g[2] for group, g in per_group.items()}
        self._topics = {group: g[3] for group, g in per_group.items()}
        if len(samples) > len(copied):  # (every key committed has its window now)
            for key in [k for k in samples if k not in copied]:
                del samples[key]
        for group, (c, e, _n, _t) in per_group.items():
            self._groups.setdefault(group, deque(maxlen=self.window)).append(Sample(now, c, e))
        for group in [g for g in self._groups if g not in per_group]:
            del self._groups[group]

    def lag(self) -> dict[str, int]:
        """group -> messages behind over its queues, as of the last sample."""
        return {group: w[-1].lag for group, w in self._groups.items()}

    def report(self, instances: Mapping[str, str] | None = None,
               exactly_once: Mapping[str, int] | None = None) -> dict[str, dict]:
        """group -> {status, lag, trend_per_s, consume_per_s, produce_per_s, drain_s, idle_s,
        topics, queue_count, queues: [{topic, queue, committed, end, lag, status, drain_s}]}
        (JSON-ready); `queues` lists only queues with lag, the worst first, at most
        MAX_QUEUE_ROWS (caught-up queues are counted in `queue_count`). `instances`: the
        names that are a broadcast group's instance -> that group (`instance_of`);
        `exactly_once`: the groups whose offsets move with transactions.

        The group's verdict is judged on its summed offsets: a slow consumer visits each
        of its queues in turn, so one queue may sit still for seconds while the group
        moves; that queue's row says STALLED, the group WARNING (or OK)."""
        now = self.clock()
        groups: dict[str, dict] = {}
        for group, window in sorted(self._groups.items()):
            heard = self._heard.get(group, now)
            v = judge(window, now - heard <= self.stopped_after_s, self.stall_polls)
            groups[group] = {"status": v.status, "lag": v.lag,
                             "trend_per_s": round(v.trend_per_s, 3),
                             "consume_per_s": round(v.consume_per_s, 3),
                             "produce_per_s": round(v.produce_per_s, 3),
                             "drain_s": _round(v.drain_s), "idle_s": round(now - heard, 3),
                             "topics": sorted(self._topics.get(group, ())),
                             "queue_count": self._queue_counts.get(group, 0), "queues": []}
            if instances and group in instances:
                groups[group]["instance_of"] = instances[group]
            if exactly_once and group in exactly_once:
                groups[group]["exactly_once"] = True
        # caught-up queues are counted, not listed (a group may own 10,000 queues)
        for key in self._behind:
            group, topic, qid = key
            window = self._samples[key]
            g = groups[group]
            v = judge(map(Sample._make, window), now - self._heard.get(group, now) <= self.stopped_after_s,
                      self.stall_polls)
            g["queues"].append({"topic": topic, "queue": qid, "committed": window[-1][1],
                                "end": window[-1][2], "lag": v.lag, "status": v.status,
                                "drain_s": _round(v.drain_s)})
        for g in groups.values():  # the worst first, at most MAX_QUEUE_ROWS of them
            g["queues"].sort(key=lambda q: (-SEVERITY[q["status"]], -q["lag"]))
            del g["queues"][MAX_QUEUE_ROWS:]
        return groups


def drain_time(lag: int, consume_per_s: float, produce_per_s: float) -> float | None:
    """Seconds to work off `lag` at the net rate; 0 with no lag; None when it is not being
    worked off: falling behind, or keeping up with what is in flight (a lag the group
    consumes within IN_FLIGHT_S, which a net rate near 0 turned into "drains in 2m50s"
    for 284 messages at 997/s)."""
    if lag <= 0:
        return 0.0
    if consume_per_s <= produce_per_s or lag <= consume_per_s * IN_FLIGHT_S:
        return None
    return _round(lag / (consume_per_s - produce_per_s))


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)
