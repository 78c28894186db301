"""Flow control (限流) across the cluster: the quotas each broker enforces and
the sends it refused, per topic and producer group.

Brokers count refusals since they started; the console turns the counts into
rates by the difference between two answers of the same broker, over the
broker's own clock (its `time`), so a stale answer (one missed poll, same
document) keeps the last rate instead of reading as zero, and a restarted
broker (a count that went down) has no rate until its next answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class QuotaRow:
    broker: str
    kind: str  # topic | group
    target: str  # a name, or a prefix ending in '*'
    rate: float | None
    burst: float | None
    warmup_s: float | None
    rate_now: tuple[tuple[str, float], ...] = ()  # (name, rate) of buckets warming up


@dataclass(frozen=True)
class ThrottleRow:
    broker: str
    topic: str
    group: str
    total: int  # refused since the broker started
    per_s: float | None = None  # over the last poll; None: no earlier answer to compare


@dataclass(frozen=True)
class FlowView:
    quotas: tuple[QuotaRow, ...] = ()
    throttled: tuple[ThrottleRow, ...] = ()
    total: int = 0  # refused sends, every broker, since each started
    per_s: float = 0.0
    # broker -> (its answer's time, {(topic, group): count}): what the next rates are from
    seen: Mapping[str, tuple[float | None, Mapping[tuple[str, str], int]]] = \
        field(default_factory=dict)

    @property
    def active(self) -> bool:
        """Something to show: a quota in force or a refusal ever."""
        return bool(self.quotas or self.total)

    @property
    def rate_known(self) -> bool:
        """False on a first poll with refusals (no earlier count to take a rate from)."""
        return not self.throttled or any(t.per_s is not None for t in self.throttled)

    def by_topic(self) -> list[tuple[str, str, int, float]]:
        """(topic, group, total, per_s) over every broker, busiest first."""
        sums: dict[tuple[str, str], list[float]] = {}
        for t in self.throttled:
            s = sums.setdefault((t.topic, t.group), [0, 0.0])
            s[0] += t.total
            s[1] += t.per_s or 0.0
        return sorted(((k[0], k[1], int(v[0]), v[1]) for k, v in sums.items()),
                      key=lambda r: (-r[3], -r[2], r[0], r[1]))


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _quotas(broker: str, flow) -> list[QuotaRow]:
    out = []
    for q in flow.quotas:
        rate = _num(q.get("rate"))
        warming = tuple((str(b.get("name")), r) for b in q.get("buckets") or ()
                        if isinstance(b, Mapping) and (r := _num(b.get("rate_now"))) is not None
                        and rate is not None and r < rate)
        out.append(QuotaRow(broker, str(q.get("kind") or ""), str(q.get("target") or ""), rate,
                            _num(q.get("burst")), _num(q.get("warmup_s")), warming))
    return out


def merge_flow(brokers: Sequence[Any], prev: FlowView | None = None) -> FlowView:
    """Quotas and refusals of every answering broker (a DOWN one's are left out)."""
    seen_before = prev.seen if prev else {}
    rates_before = {(t.broker, t.topic, t.group): t.per_s for t in prev.throttled} \
        if prev else {}
    quotas, rows, seen = [], [], {}
    for b in brokers:
        if b.state == "DOWN" or b.stats is None:
            continue
        flow, when = b.stats.flow, b.stats.time
        quotas += _quotas(b.name, flow)
        counts = {(str(t.get("topic") or ""), str(t.get("group") or "")): int(c)
                  for t in flow.throttled if (c := _num(t.get("count"))) is not None}
        seen[b.name] = (when, counts)
        last_when, last = seen_before.get(b.name, (None, None))
        for (topic, group), count in sorted(counts.items()):
            per_s = None
            if last is not None and when is not None and last_when is not None:
                if when == last_when:  # the same answer again: the rate stands
                    per_s = rates_before.get((b.name, topic, group))
                elif when > last_when and count >= last.get((topic, group), 0):
                    per_s = (count - last.get((topic, group), 0)) / (when - last_when)
            rows.append(ThrottleRow(b.name, topic, group, count, per_s))
    return FlowView(tuple(quotas), tuple(rows), sum(r.total for r in rows),
                    sum(r.per_s or 0.0 for r in rows), seen)
