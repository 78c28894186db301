"""Consumer groups across the cluster: each broker judges the groups that
commit on it (broker_core.observe.backlog); the console merges those verdicts
into one row per group.

A group's status is its worst broker's, lag and rates are summed, and its
time to drain is recomputed from the sums (summing per-broker drain times
would say nothing). Slaves of a replicated group report no groups (their
master judges), and are skipped even if an older one did, so a queue is never
counted twice. Each group keeps its lag over the last few minutes for the
trend sparkline: the broker's trend is over its 10 s window only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from broker_core.observe.backlog import SEVERITY, drain_time

TREND_S = 300.0  # how much lag history a group keeps
TREND_POINTS = 120  # and at most this many points (one per poll)


@dataclass(frozen=True)
class QueueRow:
    """One queue of a group, as the broker that holds it judges it."""

    broker: str
    topic: str
    queue: int
    committed: int | None
    end: int | None
    lag: int
    status: str
    drain_s: float | None


@dataclass(frozen=True)
class GroupView:
    name: str
    status: str = "OK"  # the worst broker's: OK | WARNING | STALLED | STOPPED
    lag: int = 0
    trend_per_s: float = 0.0  # lag change per second (the brokers' windows, summed)
    consume_per_s: float = 0.0
    produce_per_s: float = 0.0
    drain_s: float | None = 0.0  # None: not catching up
    idle_s: float | None = None  # since the group was last heard from by any broker
    brokers: tuple[str, ...] = ()  # the brokers that report it
    topics: tuple[str, ...] = ()
    queues: tuple[QueueRow, ...] = ()
    history: tuple[tuple[float, int], ...] = ()  # (console time, lag), oldest first
    dead_letters: int = 0  # in its dead-letter queue (%DLQ%<group>), every broker
    dead_per_s: float = 0.0  # how fast that grows
    retries: int = 0  # sent back and kept in its retry topic (%RETRY%<group>), every broker
    retries_per_s: float = 0.0
    instance_of: str | None = None  # this row is an instance of a broadcast group
    exactly_once: bool = False  # its offsets move with transactions (client.transform)

    @property
    def group(self) -> str:
        """The consumer group (a broadcast instance's row: its group's name)."""
        return self.instance_of or self.name

    @property
    def severity(self) -> int:
        return SEVERITY.get(self.status, 0)

    def queues_not_ok(self) -> tuple[QueueRow, ...]:
        """Its queues judged other than OK, worst first. Not always those of the group's
        own status: a broker judges a group on its summed offsets, so a slow group that
        visits its queues in turn is WARNING while the queue it is not on is STALLED."""
        return tuple(sorted((q for q in self.queues if q.status != "OK"),
                            key=lambda q: (-SEVERITY.get(q.status, 0), -q.lag)))


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return int(value)
    except (OverflowError, ValueError):
        return None


def _queue(broker: str, doc: Mapping[str, Any]) -> QueueRow:
    drain = doc.get("drain_s")
    return QueueRow(broker, str(doc.get("topic") or ""), _int(doc.get("queue")) or 0,
                    _int(doc.get("committed")), _int(doc.get("end")),
                    _int(doc.get("lag")) or 0, str(doc.get("status") or "OK"),
                    float(drain) if isinstance(drain, int | float)
                    and not isinstance(drain, bool) else None)


def reporting(brokers: Sequence[Any]) -> list[Any]:
    """The brokers whose verdicts count: answering (or one poll stale), not slaves."""
    return [b for b in brokers
            if b.state != "DOWN" and b.stats is not None and b.role != "SLAVE"]


def merge_groups(brokers: Sequence[Any], prev: Sequence[GroupView] = (),
                 now: float = 0.0) -> tuple[GroupView, ...]:
    """One GroupView per group any reporting broker judges, sorted worst first
    then by name; `prev` (the last result) carries the lag history."""
    parts: dict[str, list[tuple[str, Any]]] = {}
    for b in reporting(brokers):
        for group, verdict in b.stats.consumers.items():
            parts.setdefault(group, []).append((b.name, verdict))
    before = {g.name: g for g in prev}
    groups = []
    for name, verdicts in parts.items():
        status = max((v.status for _, v in verdicts), key=lambda s: SEVERITY.get(s, 0))
        lag = sum(v.lag for _, v in verdicts)
        # a rate is never negative: a broker from before backlog.consume_rate sent the net
        # move of the committed offset, which an offset reset turns below 0 (not known: 0)
        consume = sum(max(0.0, v.consume_per_s) for _, v in verdicts)
        produce = sum(v.produce_per_s for _, v in verdicts)
        idles = [v.idle_s for _, v in verdicts if v.idle_s is not None]
        topics = sorted({t for _, v in verdicts for t in v.topics})
        queues = tuple(sorted((_queue(broker, q) for broker, v in verdicts for q in v.queues),
                              key=lambda q: (q.topic, q.broker, q.queue)))
        old = before.get(name)
        dead = [b.stats.dead_letters.get(name) or {} for b in reporting(brokers)]
        retried = [b.stats.retries.get(name) or {} for b in reporting(brokers)]
        instance_of = next((v.instance_of for _, v in verdicts if v.instance_of), None)
        groups.append(GroupView(
            name, status, lag, sum(v.trend_per_s for _, v in verdicts), consume, produce,
            drain_time(lag, consume, produce), min(idles) if idles else None,
            tuple(sorted(broker for broker, _ in verdicts)), tuple(topics), queues,
            _history(old.history if old else (), now, lag),
            int(sum(d.get("count", 0) for d in dead)), sum(d.get("per_s", 0) for d in dead),
            int(sum(r.get("count", 0) for r in retried)), sum(r.get("per_s", 0) for r in retried),
            instance_of, any(v.exactly_once for _, v in verdicts)))
    return tuple(sorted(groups, key=lambda g: (-g.severity, g.name)))


def _history(old: tuple[tuple[float, int], ...], now: float, lag: int
             ) -> tuple[tuple[float, int], ...]:
    kept = [p for p in old if now - TREND_S < p[0] < now]  # a replayed poll at the same time
    kept.append((now, lag))  # replaces its point rather than adding one
    return tuple(kept[-TREND_POINTS:])


def trend_arrow(group: GroupView) -> str:
    """↑ growing, ↓ draining, → steady: from the broker's window, whose slope is what
    WARNING is judged on (a console history of one poll says nothing yet)."""
    steady = max(1.0, 0.02 * group.produce_per_s)  # a busy topic's lag jitters by a batch
    if group.trend_per_s > steady:
        return "↑"
    if group.trend_per_s < -steady:
        return "↓"
    return "→"


def lag_growing(group: GroupView) -> bool:
    """The lag is growing (the trend arrow's ↑): such a group is not "keeping up", whatever
    its status (an offset reset raises the lag in one step while the group is judged OK)."""
    return trend_arrow(group) == "↑"


def counts(groups: Sequence[GroupView]) -> dict[str, int]:
    """Groups per status, for the header and `floodgate status`."""
    out: dict[str, int] = {}
    for g in groups:
        out[g.status] = out.get(g.status, 0) + 1
    return out
