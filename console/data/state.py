"""ClusterState: what the console and `floodgate status` show, built purely
from brokers' and producers' /stats, decoded once by the sources into
`BrokerStats` / `ProducerStats`.

`build_state(samples, producers, prev, now)` is a pure function: the previous
state carries what needs memory (consecutive failed polls, the last 5 minutes
of send histograms, the alert log, availability counters, consumer groups'
lag history, the refusal counts flow-control rates are taken from), so a replay of
recorded /stats files gives the same picture every time. The typed stats are
lenient already (a missing or malformed figure is None); only the producers'
fuse snapshot is still a mapping, read defensively by `fuse_counts`.

Broker states, worst first: DOWN (no answer for `down_after` polls in a row),
ISOLATED (a producer's fuse excludes it), FAILING (it failed a send itself in the
last 10 s: an error, busy, disk full, a flush or slave timeout; not a refusal of
the caller's input), SLOW (send p99 or max over the SLA in the last 10 s), UP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from broker_core.observe.figures import OpWindow
from broker_core.observe.stats_doc import BrokerStats, ProducerStats
from console.data.alerts import Alert, AlertLog, evaluate_alerts, sends
from console.data.consumers import GroupView, merge_groups
from console.data.flow_control import FlowView, merge_flow
from console.data.fuse_counts import FuseCounts, fuse_counts, isolated_by
from console.data.histories import merge_histograms, merge_history
from console.data.replicas import in_group, serving, with_peers, without_copied_lag
from console.data.views import BrokerView
from heatmap.sla import SLA_MAX_S, SLA_MEAN_S

STATES = ("DOWN", "ISOLATED", "FAILING", "SLOW", "UP")  # worst first
BEHIND_SHARE = 0.10  # a load generator this far short of its target rate is said to be
MAX_EVENTS = 300


@dataclass(frozen=True)
class Sla:
    """The lines the console judges against (ConsoleConfig's, the Double-11 talk's by default)."""

    mean_s: float = SLA_MEAN_S
    max_s: float = SLA_MAX_S


@dataclass(frozen=True)
class BrokerSample:
    """One poll of one broker: its decoded /stats or why there was none."""

    key: str  # HTTP address: stable even before the broker told us its name
    name: str
    stats: BrokerStats | None
    error: str | None = None


@dataclass(frozen=True)
class ProducerSample:
    key: str
    stats: ProducerStats | None
    error: str | None = None


@dataclass(frozen=True)
class ProducerView:
    key: str
    name: str
    up: bool
    error: str | None = None
    fuse: Mapping[str, Any] | None = None
    load: Mapping[str, Any] | None = None
    sends: Mapping[str, float] = field(default_factory=dict)  # its FLOW_CONTROL figures

    @property
    def excluded(self) -> list[str]:
        return list(self.counts.excluded)

    @property
    def behind(self) -> tuple[float, float] | None:
        """(achieved, target) msgs/s of a load generator more than BEHIND_SHARE short of
        the rate it was asked for (over its last seconds), else None."""
        load = self.load or {}
        target, rate = load.get("target_rate"), load.get("rate")
        if not isinstance(target, int | float) or not isinstance(rate, int | float):
            return None
        return (rate, target) if target > 0 and rate < (1 - BEHIND_SHARE) * target else None

    @cached_property
    def counts(self) -> FuseCounts:
        return fuse_counts(self.fuse)


@dataclass(frozen=True)
class Summary:
    brokers: int = 0
    by_state: Mapping[str, int] = field(default_factory=dict)
    in_per_s: float = 0.0
    out_per_s: float = 0.0
    p99: float | None = None
    max: float | None = None
    mean: float | None = None
    availability: float | None = None  # share of polls each group could take sends (`serving`)
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
    answered: int = 0  # groups serving, summed over this session's polls (availability)
    asked: int = 0  # groups polled, summed likewise
    host: Mapping[str, Any] | None = None
    sla: Sla = Sla()
    consumers: tuple[GroupView, ...] = ()  # consumer groups, worst first
    flow: FlowView = field(default_factory=FlowView)
    logged: tuple[dict, ...] = ()  # the newest of the cluster's events log, oldest first

    def group(self, name: str) -> GroupView | None:
        return next((g for g in self.consumers if g.name == name), None)

    def broker(self, key_or_name: str) -> BrokerView | None:
        for b in self.brokers:
            if key_or_name in (b.key, b.name):
                return b
        return None

    @property
    def active_alerts(self) -> tuple[Alert, ...]:
        return self.alerts.active


# --- the state -----------------------------------------------------------------


def _isolation(producers: Sequence[ProducerView]) -> tuple[dict[str, str], dict[str, str]]:
    """Broker name -> why a producer's fuse excludes it, with the evidence of the call that
    isolated it ("fuse of demo: slow, a call of 100.8 ms, the line 10.0 ms"); and name ->
    why one isolated too serves anyway (the cap full: the earliest isolated serve again),
    so that a row shown UP says why the fuse line names it."""
    out: dict[str, str] = {}
    overflow: dict[str, str] = {}
    for p in producers:
        for name in p.excluded:
            why = p.counts.entry(name).get("reason", "isolated")
            detail = isolated_by(p.fuse, name)
            out.setdefault(name, f"fuse of {p.name}: {why}" + (f", {detail}" if detail else ""))
        for name in p.counts.overflow:
            why = p.counts.entry(name).get("reason", "isolated")
            overflow.setdefault(name, f"fuse of {p.name}: {why}, serving as overflow (cap full)")
    return out, overflow


def _judge(send10: OpWindow, sla_max_s: float) -> str:
    p99, mx = send10.p99, send10.max
    worst = max((v for v in (p99, mx) if v is not None), default=None)
    if worst is not None and worst > sla_max_s:
        which = "p99" if p99 is not None and p99 > sla_max_s else "max"
        return f"send {which} {worst * 1000:.1f} ms > {sla_max_s * 1000:g} ms (10 s)"
    return ""


def last_failure(stats) -> str:
    """The latest send the broker failed itself, as "CODE: text" ("" if none)."""
    return _code_and_text(stats.last_send_failure)


def last_refusal(stats) -> str:
    """The latest send the broker refused (not its own failure), as "CODE: text"."""
    return _code_and_text(stats.last_send_refusal)


def _code_and_text(last) -> str:
    code, text = str(last.get("code") or ""), str(last.get("text") or "")
    return f"{code}: {text}" if code and text else code


def _failing(send10: OpWindow, last: str) -> str:
    n = send10.failures
    if not n:
        return ""
    told = f"{n:,} of {sends(send10.count)}" if send10.count else sends(n)
    return f"failed {told} (10 s)" + (f", latest {last}" if last else "")


def broker_view(sample: BrokerSample, prev: BrokerView | None, isolated: Mapping[str, str],
                now: float, down_after: int, sla_max_s: float,
                overflow: Mapping[str, str] | None = None) -> BrokerView:
    stats = sample.stats
    if stats is None:
        failures = (prev.failures if prev else 0) + 1
        reason = sample.error or "no answer"
        if prev is None or prev.stats is None or failures >= down_after:
            base = prev or BrokerView(sample.key, sample.name, "DOWN")
            return replace(base, state="DOWN", reason=reason, failures=failures)
        # one missed poll: keep the last picture, say it is stale
        return replace(prev, failures=failures, reason=f"stale (last poll: {reason})")
    name = stats.broker or sample.name
    send10, pull10 = stats.window("send", "10s"), stats.window("pull", "10s")
    slow = _judge(send10, sla_max_s)
    latest = last_failure(stats)
    failing = _failing(send10, latest)
    ha = stats.ha
    # a replicated cluster's producers route, and so isolate, groups: its master is out
    fused = isolated.get(name) or (isolated.get(ha.group) if ha and ha.role == "MASTER"
                                   else None)  # fmt: skip
    spare = overflow.get(name) or (overflow.get(ha.group) if ha and ha.role == "MASTER"
                                   else None) if overflow else None
    if fused:
        state, reason = "ISOLATED", fused + (f"; {slow}" if slow else "")
    elif failing:
        state, reason = "FAILING", "; ".join(r for r in (failing, slow) if r)
    elif slow:
        state, reason = "SLOW", slow
    else:
        state, reason = "UP", spare or ""
    return BrokerView(
        key=sample.key, name=name, state=state, reason=reason, failures=0,
        group=ha.group if ha else None, role=ha.role if ha else None,
        epoch=ha.epoch if ha else None, replication=ha.replication if ha else "",
        in_sync=len(ha.in_sync) if ha and ha.role == "MASTER" else None,
        repl_lag_bytes=ha.worst_lag_bytes if ha else None,
        repl_lag_s=ha.worst_lag_s if ha else None,
        role_since=_since(ha) if ha else None,
        role_why=_role_why(ha) if ha else "",
        last_seen=stats.time or now, in_per_s=send10.msgs_per_s, out_per_s=pull10.msgs_per_s,
        mean=send10.mean, p50=send10.p50, p99=send10.p99, p999=send10.p999, max=send10.max,
        over_20ms=send10.over_20ms, errors=send10.errors, send_failures=send10.failures,
        last_failure=latest if send10.failures else "",
        last_refusal=last_refusal(stats) if (send10.errors or 0) > (send10.failures or 0)
        else "",
        disk_used_ratio=stats.disk.used_ratio, flush_lag_bytes=stats.flush_lag_bytes,
        consumer_lag=sum(stats.consumer_lag.values()),
        fault=stats.faults if stats.fault_active else None, stats=stats,
        history=merge_history(prev.history if prev else (), stats.history.get("send", ())))


def _role_why(ha) -> str:
    """The reason its latest `master` event gives (after "; "), or ""."""
    masters = [e for e in ha.events if e.get("kind") == "master"]
    detail = str(masters[-1].get("detail", "")) if masters else ""
    return detail.split("; ", 1)[1] if "; " in detail else ""


def _since(ha) -> float | None:
    value = ha.doc.get("since")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def producer_view(sample: ProducerSample) -> ProducerView:
    stats = sample.stats
    if stats is None:
        return ProducerView(sample.key, sample.key, False, sample.error or "no answer")
    return ProducerView(sample.key, stats.producer or sample.key, True, None, stats.fuse,
                        stats.load, stats.sends)


def summarize(brokers: Sequence[BrokerView], producers: Sequence[ProducerView],
              answered: int, asked: int) -> Summary:
    by_state = {s: 0 for s in STATES}
    for b in brokers:
        by_state[b.state] = by_state.get(b.state, 0) + 1
    live = [b for b in brokers if b.state != "DOWN"]
    merged = merge_histograms(h for b in live for _, h in b.history[-10:])
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
        if old is not None and old.role and b.role and \
                (old.role, old.epoch) != (b.role, b.epoch):
            if b.role == "MASTER" and old.role != "MASTER":
                text = (f"failover: master of {b.group} at epoch {b.epoch} (was {old.role})"
                        + _failover_cause(b, prev, brokers))
            else:
                text = f"{old.role} → {b.role} of {b.group} (epoch {old.epoch} → {b.epoch})"
            events.append(Event(now, b.name, text))
    return tuple(events[-MAX_EVENTS:])


def _failover_cause(new: BrokerView, prev: ClusterState, brokers: Sequence[BrokerView]) -> str:
    """Why, as far as the console can tell: the controller's reason, and whether the
    old master still answers (then it was cut off from ZooKeeper, not dead)."""
    why = f": {new.role_why}" if new.role_why else ""
    old = next((b for b in prev.brokers if b.group == new.group and b.role == "MASTER"
                and b.name != new.name), None)
    if old is None:
        return why
    now = next((b for b in brokers if b.key == old.key), None)
    if now is not None and now.answering:
        return why + f"; {old.name} still answers here: cut off from ZooKeeper, not dead"
    if now is not None and "alive to its peers" in now.reason:
        return why + f"; {old.name} unreachable from here but alive to its peers"
    return why + f"; {old.name} does not answer"


def build_state(samples: Sequence[BrokerSample], producers: Sequence[ProducerSample] = (),
                prev: ClusterState | None = None, now: float = 0.0,
                host: Mapping[str, Any] | None = None, down_after: int = 2,
                sla_max_s: float = SLA_MAX_S, sla_mean_s: float = SLA_MEAN_S,
                groups: Mapping[str, str] | None = None) -> ClusterState:
    """The next state from one poll of every broker (and the latest producer answers)."""
    pviews = tuple(producer_view(p) for p in producers)
    isolated, overflow = _isolation(pviews)
    before = {b.key: b for b in prev.brokers} if prev else {}
    groups = groups or {}
    brokers = without_copied_lag(with_peers([
        in_group(broker_view(s, before.get(s.key), isolated, now, down_after, sla_max_s,
                             overflow), groups) for s in samples]))
    up, units = serving(brokers)
    answered = (prev.answered if prev else 0) + up
    asked = (prev.asked if prev else 0) + units
    summary = summarize(brokers, pviews, answered, asked)
    groups = merge_groups(brokers, prev.consumers if prev else (), now)
    flow = merge_flow(brokers, prev.flow if prev else None)
    alerts = (prev.alerts if prev else AlertLog()).update(
        evaluate_alerts(brokers, pviews, sla_max_s, sla_mean_s, now, groups, flow), now)
    return ClusterState(now=now, brokers=brokers, producers=pviews, summary=summary,
                        alerts=alerts, events=_events(prev, brokers, now),
                        polls=(prev.polls if prev else 0) + 1, answered=answered, asked=asked,
                        host=host if host is not None else (prev.host if prev else None),
                        sla=Sla(sla_mean_s, sla_max_s), consumers=groups, flow=flow)
