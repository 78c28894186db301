"""ClusterState: what the console and `floodgate status` show, built purely
from brokers' and producers' /stats JSON.

`build_state(samples, producers, prev, now)` is a pure function: the previous
state carries what needs memory (consecutive failed polls, the last 5 minutes
of send histograms, the alert log, availability counters), so a replay of
recorded /stats files gives the same picture every time. Nothing here trusts
the JSON: missing or malformed fields become None, never an exception.

Broker states, worst first: DOWN (no answer for `down_after` polls in a row),
ISOLATED (a producer's fuse excludes it), SLOW (send p99 or max over the SLA
in the last 10 s), UP.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from console.data.alerts import Alert, AlertLog, evaluate_alerts
from heatmap import LatencyHistogram
from heatmap.sla import SLA_MAX_S, SLA_MEAN_S

HISTORY_S = 300
STATES = ("DOWN", "ISOLATED", "SLOW", "UP")  # worst first
MAX_EVENTS = 300


@dataclass(frozen=True)
class Sla:
    """The lines the console judges against (ConsoleConfig's, seed 000's by default)."""

    mean_s: float = SLA_MEAN_S
    max_s: float = SLA_MAX_S


@dataclass(frozen=True)
class BrokerSample:
    """One poll of one broker: its /stats document or why there was none."""

    key: str  # HTTP address: stable even before the broker told us its name
    name: str
    doc: Mapping[str, Any] | None
    error: str | None = None


@dataclass(frozen=True)
class ProducerSample:
    key: str
    doc: Mapping[str, Any] | None
    error: str | None = None


@dataclass(frozen=True)
class BrokerView:
    key: str
    name: str
    state: str
    reason: str = ""
    failures: int = 0  # polls in a row without an answer
    last_seen: float | None = None
    in_per_s: float | None = None
    out_per_s: float | None = None
    mean: float | None = None
    p50: float | None = None
    p99: float | None = None
    p999: float | None = None
    max: float | None = None
    over_20ms: int | None = None  # sends over 20 ms in the last 10 s
    errors: int | None = None  # send errors in the last 10 s
    disk_used_ratio: float | None = None
    flush_lag_bytes: int | None = None
    consumer_lag: int | None = None
    fault: Mapping[str, Any] | None = None
    doc: Mapping[str, Any] | None = None  # the latest /stats answer, for the broker screen
    history: tuple[Mapping[str, Any], ...] = ()  # send histograms per second, oldest first

    @property
    def answering(self) -> bool:
        return self.failures == 0 and self.doc is not None


@dataclass(frozen=True)
class ProducerView:
    key: str
    name: str
    up: bool
    error: str | None = None
    fuse: Mapping[str, Any] | None = None
    load: Mapping[str, Any] | None = None

    @property
    def excluded(self) -> list[str]:
        return list(self.counts.excluded)

    @cached_property
    def counts(self) -> FuseCounts:
        return fuse_counts(self.fuse)


@dataclass(frozen=True)
class FuseCounts:
    """The one meaning of "isolated" shared by the header, the fuse screen and
    the cap alert: `excluded` brokers are isolated and not serving (what the
    cap bounds); `overflow` ones are isolated too but serve again because the
    cap was exceeded (rule 4: the earliest isolated go back first)."""

    excluded: tuple[str, ...] = ()
    overflow: tuple[str, ...] = ()
    isolated: tuple[Mapping[str, Any], ...] = ()  # the fuse's entries, earliest first
    cap: int | None = None
    brokers: int | None = None  # how many brokers the fuse chooses among
    would_exclude: tuple[str, ...] = ()  # a dry run's `excluded` (which stays empty)
    dry_run: bool = False

    @property
    def at_cap(self) -> bool:
        return self.cap is not None and self.cap > 0 and len(self.excluded) >= self.cap

    def entry(self, broker: str) -> Mapping[str, Any]:
        return next((i for i in self.isolated if i.get("broker") == broker), {})


def fuse_counts(fuse: Any) -> FuseCounts:
    """FuseCounts from a producer's /stats `fuse` dict: unknown keys ignored,
    missing or malformed ones read as empty (lists are derived from the entries)."""
    entries = tuple(i for i in _list(fuse, "isolated")
                    if isinstance(i, Mapping) and isinstance(i.get("broker"), str))
    dry_run = _get(fuse, "dry_run") is True
    held = [i["broker"] for i in entries if not i.get("overflow")]  # isolated, not serving

    def names(key: str, derived: list[str]) -> tuple[str, ...]:
        value = _get(fuse, key)
        return tuple(str(b) for b in value) if isinstance(value, list) else tuple(derived)

    brokers = _get(fuse, "brokers")
    return FuseCounts(
        excluded=names("excluded", [] if dry_run else held),
        overflow=names("overflow", [i["broker"] for i in entries if i.get("overflow")]),
        isolated=entries, cap=_int(fuse, "cap"),
        brokers=len(brokers) if isinstance(brokers, list) else None,
        would_exclude=names("would_exclude", held if dry_run else []), dry_run=dry_run)


@dataclass(frozen=True)
class Summary:
    brokers: int = 0
    by_state: Mapping[str, int] = field(default_factory=dict)
    in_per_s: float = 0.0
    out_per_s: float = 0.0
    p99: float | None = None
    max: float | None = None
    mean: float | None = None
    availability: float | None = None  # share of broker polls answered this session
    isolated: int = 0  # brokers some producer's fuse excludes (FuseCounts.excluded)
    overflow: int = 0  # isolated but serving again by rule 4, excluded by none
    cap: int | None = None

    @property
    def healthy(self) -> bool:
        return self.brokers > 0 and self.by_state.get("UP", 0) == self.brokers


@dataclass(frozen=True)
class Event:
    time: float
    broker: str
    text: str


@dataclass(frozen=True)
class ClusterState:
    now: float
    brokers: tuple[BrokerView, ...] = ()
    producers: tuple[ProducerView, ...] = ()
    summary: Summary = field(default_factory=Summary)
    alerts: AlertLog = field(default_factory=AlertLog)
    events: tuple[Event, ...] = ()
    polls: int = 0
    answered: int = 0  # broker polls answered, for availability
    asked: int = 0
    host: Mapping[str, Any] | None = None
    sla: Sla = Sla()

    def broker(self, key_or_name: str) -> BrokerView | None:
        for b in self.brokers:
            if key_or_name in (b.key, b.name):
                return b
        return None

    @property
    def active_alerts(self) -> tuple[Alert, ...]:
        return self.alerts.active


# --- defensive readers ---------------------------------------------------------


def _get(doc: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(key)
    return doc


def num(doc: Any, *path: str) -> float | None:
    value = _get(doc, *path)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _int(doc: Any, *path: str) -> int | None:
    value = num(doc, *path)
    return None if value is None else int(value)


def _list(doc: Any, *path: str) -> list:
    value = _get(doc, *path)
    return value if isinstance(value, list) else []


# --- histograms ------------------------------------------------------------------


def merge_hist_dicts(dicts: Iterable[Mapping[str, Any]]) -> LatencyHistogram:
    """One histogram from many to_dict() forms (bad ones are skipped).

    The hot loop of a refresh (200 brokers x 10 s): plain dict access, and the
    bucket keys are usually ints already (merge_history parsed them once).
    """
    buckets: dict[int, int] = {}
    get = buckets.get
    count, total, lo, hi, schema = 0, 0.0, None, None, None
    for d in dicts:
        try:
            raw = d["buckets"]
            if not d["count"] or not raw:
                continue
            if schema is None:
                schema = d.get("schema", 3)
            elif d.get("schema", 3) != schema:
                continue
            items = raw.items()
            if type(next(iter(raw))) is not int:
                items = [(int(k), int(v)) for k, v in items]
            n = 0
            for k, v in items:
                buckets[k] = get(k, 0) + v
                n += v
            dmin, dmax = d.get("min"), d.get("max")
            total += float(d.get("sum") or 0.0)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        count += n
        if isinstance(dmin, int | float) and (lo is None or dmin < lo):
            lo = dmin
        if isinstance(dmax, int | float) and (hi is None or dmax > hi):
            hi = dmax
    if not count:
        return LatencyHistogram()
    try:
        return LatencyHistogram.from_dict({"schema": schema, "count": count, "sum": total,
                                           "min": lo, "max": hi, "buckets": buckets})
    except ValueError:
        return LatencyHistogram()


def _normalized(h: Mapping[str, Any]) -> Mapping[str, Any]:
    """Bucket keys as ints, once, so every later merge skips the parsing."""
    raw = h.get("buckets")
    if not isinstance(raw, Mapping):
        return h
    try:
        return {**h, "buckets": {int(k): int(v) for k, v in raw.items()}}
    except (TypeError, ValueError):
        return {**h, "buckets": {}, "count": 0}


def merge_history(old: Sequence[Mapping[str, Any]], new: Iterable[Any], keep_s: int = HISTORY_S
                  ) -> tuple[Mapping[str, Any], ...]:
    """Per-second histograms by `ts`, newest answer wins, last `keep_s` seconds."""
    by_ts = {int(h["ts"]): h for h in old}
    for h in new:
        ts = _get(h, "ts")
        if isinstance(ts, int | float) and not isinstance(ts, bool):
            by_ts[int(ts)] = _normalized(h)
    if not by_ts:
        return ()
    newest = max(by_ts)
    return tuple(by_ts[t] for t in sorted(by_ts) if t > newest - keep_s)


# --- the state -----------------------------------------------------------------


def _isolation(producers: Sequence[ProducerView]) -> dict[str, str]:
    """Broker name -> why a producer's fuse excludes it."""
    out: dict[str, str] = {}
    for p in producers:
        for name in p.excluded:
            out.setdefault(name, f"fuse of {p.name}: {p.counts.entry(name).get('reason', 'isolated')}")
    return out


def _judge(send10: Any, sla_max_s: float) -> str:
    p99, mx = num(send10, "p99"), num(send10, "max")
    worst = max((v for v in (p99, mx) if v is not None), default=None)
    if worst is not None and worst > sla_max_s:
        which = "p99" if p99 is not None and p99 > sla_max_s else "max"
        return f"send {which} {worst * 1000:.1f} ms > {sla_max_s * 1000:g} ms (10 s)"
    return ""


def broker_view(sample: BrokerSample, prev: BrokerView | None, isolated: Mapping[str, str],
                now: float, down_after: int, sla_max_s: float) -> BrokerView:
    doc = sample.doc if isinstance(sample.doc, Mapping) else None
    if doc is None:
        failures = (prev.failures if prev else 0) + 1
        reason = sample.error or "no answer"
        if prev is None or prev.doc is None or failures >= down_after:
            base = prev or BrokerView(sample.key, sample.name, "DOWN")
            return replace(base, state="DOWN", reason=reason, failures=failures)
        # one missed poll: keep the last picture, say it is stale
        return replace(prev, failures=failures, reason=f"stale (last poll: {reason})")
    name = str(doc.get("broker") or sample.name)
    send10 = _get(doc, "ops", "send", "10s")
    pull10 = _get(doc, "ops", "pull", "10s")
    lag = _get(doc, "consumer_lag")
    lag_total = sum(int(v) for v in lag.values() if isinstance(v, int | float)) \
        if isinstance(lag, Mapping) else None
    slow = _judge(send10, sla_max_s)
    if name in isolated:
        state, reason = "ISOLATED", isolated[name] + (f"; {slow}" if slow else "")
    elif slow:
        state, reason = "SLOW", slow
    else:
        state, reason = "UP", ""
    faults = _get(doc, "faults")
    history = merge_history(prev.history if prev else (), _list(doc, "history", "send"))
    return BrokerView(
        key=sample.key, name=name, state=state, reason=reason, failures=0,
        last_seen=num(doc, "time") or now,
        in_per_s=num(send10, "msgs_per_s"), out_per_s=num(pull10, "msgs_per_s"),
        mean=num(send10, "mean"), p50=num(send10, "p50"), p99=num(send10, "p99"),
        p999=num(send10, "p999"), max=num(send10, "max"),
        over_20ms=_int(send10, "over_20ms"), errors=_int(send10, "errors"),
        disk_used_ratio=num(doc, "disk", "used_ratio"),
        flush_lag_bytes=_int(doc, "flush_lag_bytes"), consumer_lag=lag_total,
        fault=faults if isinstance(faults, Mapping) and faults.get("active") else None,
        doc=doc, history=history)


def producer_view(sample: ProducerSample) -> ProducerView:
    doc = sample.doc if isinstance(sample.doc, Mapping) else None
    if doc is None:
        return ProducerView(sample.key, sample.key, False, sample.error or "no answer")
    fuse = doc.get("fuse") if isinstance(doc.get("fuse"), Mapping) else None
    load = doc.get("load") if isinstance(doc.get("load"), Mapping) else None
    return ProducerView(sample.key, str(doc.get("producer") or sample.key), True, None, fuse, load)


def summarize(brokers: Sequence[BrokerView], producers: Sequence[ProducerView],
              answered: int, asked: int) -> Summary:
    by_state = {s: 0 for s in STATES}
    for b in brokers:
        by_state[b.state] = by_state.get(b.state, 0) + 1
    live = [b for b in brokers if b.state != "DOWN"]
    recent = [h for b in live for h in b.history[-10:]]
    merged = merge_hist_dicts(recent)
    if merged.count:
        p99, mx, mean = merged.quantile(0.99), merged.max, merged.mean
    else:  # no histograms (e.g. the Prometheus source): the worst broker stands in
        p99 = max((b.p99 for b in live if b.p99 is not None), default=None)
        mx = max((b.max for b in live if b.max is not None), default=None)
        mean = None
    counts = [p.counts for p in producers if p.up]
    caps = [c.cap for c in counts if c.cap is not None]
    excluded = {b for c in counts for b in c.excluded}
    overflow = {b for c in counts for b in c.overflow} - excluded
    return Summary(
        brokers=len(brokers), by_state=by_state,
        in_per_s=sum(b.in_per_s or 0.0 for b in live),
        out_per_s=sum(b.out_per_s or 0.0 for b in live),
        p99=p99, max=mx, mean=mean,
        availability=answered / asked if asked else None,
        isolated=len(excluded), overflow=len(overflow), cap=min(caps) if caps else None)


def _events(prev: ClusterState | None, brokers: Sequence[BrokerView], now: float) -> tuple:
    events = list(prev.events) if prev else []
    before = {b.key: b for b in prev.brokers} if prev else {}
    for b in brokers:
        old = before.get(b.key)
        if old is None or old.state != b.state:
            was = old.state if old else "start"
            events.append(Event(now, b.name, f"{was} → {b.state}" + (f": {b.reason}" if
                                                                    b.reason else "")))
    return tuple(events[-MAX_EVENTS:])


def build_state(samples: Sequence[BrokerSample], producers: Sequence[ProducerSample] = (),
                prev: ClusterState | None = None, now: float = 0.0,
                host: Mapping[str, Any] | None = None, down_after: int = 2,
                sla_max_s: float = SLA_MAX_S, sla_mean_s: float = SLA_MEAN_S) -> ClusterState:
    """The next state from one poll of every broker (and the latest producer answers)."""
    pviews = tuple(producer_view(p) for p in producers)
    isolated = _isolation(pviews)
    before = {b.key: b for b in prev.brokers} if prev else {}
    brokers = tuple(broker_view(s, before.get(s.key), isolated, now, down_after, sla_max_s)
                    for s in samples)
    answered = (prev.answered if prev else 0) + sum(1 for b in brokers if b.answering)
    asked = (prev.asked if prev else 0) + len(brokers)
    summary = summarize(brokers, pviews, answered, asked)
    alerts = (prev.alerts if prev else AlertLog()).update(
        evaluate_alerts(brokers, pviews, sla_max_s, sla_mean_s), now)
    return ClusterState(now=now, brokers=brokers, producers=pviews, summary=summary,
                        alerts=alerts, events=_events(prev, brokers, now),
                        polls=(prev.polls if prev else 0) + 1, answered=answered, asked=asked,
                        host=host if host is not None else (prev.host if prev else None),
                        sla=Sla(sla_mean_s, sla_max_s))
