"""SLA alerts (the Double-11 SLA of Alibaba's RocketMQ talk, 2016): send average over 3 ms, max over 20 ms, sends a broker
failed itself (critical) or refused (a warning; a slave's NOT_MASTER: info), a
data disk past the store's lines (75 %: a warning, 90 %: critical), a broker
down, a fuse's excluded brokers at its cap; and for replicated groups: a
failover in the last minute, a group without a master, a master without a slave
in sync, a slave lagging by more than a second; consumer groups STALLED or
STOPPED (critical) or falling behind (WARNING), sends refused by flow control
(info: a quota doing its job, but the producer group named waits for it), and a
queue far hotter than the rest of its broker (warning: one key's traffic setting
the broker's pace).

`evaluate_alerts` says which conditions hold now; `AlertLog.update` turns
that into edges (raised, severity changed, cleared) appended to a bounded list and
never rewritten: the history says what was seen when, as an SRE reads it the next
morning. While an alert is active, its live row (`active`) follows the figure: the
current value, and the worst one since it was raised.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from broker_core.protocol import BROKER_FAILURE_CODES
from broker_core.store.config import DISK_FULL_RATIO, DISK_MAX_USED_RATIO

FAILURE_NAMES = frozenset(c.name for c in BROKER_FAILURE_CODES)

MAX_ALERTS = 500
# what a raft group's members are called, for each role a master/slave broker reports
RAFT_ROLES = {"MASTER": "leader", "SLAVE": "follower", "NONE": "candidate"}


@dataclass(frozen=True)
class Alert:
    key: str  # what the condition is about, e.g. "max:broker-2"
    severity: str  # critical | warning | info
    message: str  # the condition with its latest figure
    time: float = 0.0  # when it was raised (or cleared)
    cleared: bool = False
    value: float | None = None  # the figure the condition is about, latest (in `unit`)
    unit: str = ""  # "ms" or what a count counts ("errors")
    worst: float | None = None  # the largest `value` since it was raised

    @property
    def text(self) -> str:
        """What a person reads: the message, and the worst figure when it was worse."""
        if self.worst is not None and self.value is not None and self.worst > self.value:
            return f"{self.message}; worst {figure(self.worst, self.unit)}"
        return self.message


def figure(value: float, unit: str) -> str:
    return f"{value:,.1f} ms" if unit == "ms" else f"{value:,.0f} {unit}".rstrip()


@dataclass(frozen=True)
class AlertLog:
    entries: tuple[Alert, ...] = ()  # raised and cleared edges, oldest first
    active: tuple[Alert, ...] = ()
    total: int = 0  # edges ever logged (entries keeps the last MAX_ALERTS)

    def since(self, older: AlertLog) -> tuple[Alert, ...]:
        """The edges logged after `older` (an earlier state of this log)."""
        new = self.total - older.total
        return self.entries[-new:] if new > 0 else ()

    def update(self, conditions: Mapping[str, Alert], now: float) -> AlertLog:
        """The edges since the last update appended, none rewritten: a condition raised,
        its severity changed (a new edge: "warning" then "critical" at the times each
        held), cleared. An active alert's latest figure and worst show in `active` only."""
        before = {a.key: a for a in self.active}
        added: list[Alert] = []
        active = []
        for key, alert in conditions.items():
            old = before.get(key)
            if old is None or old.severity != alert.severity:
                edge = replace(alert, time=now, cleared=False,
                               worst=alert.value if old is None else _max(old.worst, alert.value))
                added.append(edge)
                active.append(edge)
                continue
            active.append(replace(old, message=alert.message, value=alert.value,
                                  unit=alert.unit, worst=_max(old.worst, alert.value)))
        for key, old in before.items():
            if key not in conditions:
                added.append(replace(old, message=f"cleared: {old.message}", time=now,
                                     cleared=True))
        if not added and tuple(active) == self.active:
            return self
        entries = (self.entries + tuple(added))[-MAX_ALERTS:]
        return AlertLog(entries, tuple(active), self.total + len(added))


def _max(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


FAILOVER_SHOWN_S = 60.0  # a failover stays an alert this long
REPL_LAG_S = 1.0


def evaluate_alerts(brokers: Sequence[Any], producers: Sequence[Any], sla_max_s: float,
                    sla_mean_s: float, now: float | None = None, groups: Sequence[Any] = (),
                    flow: Any = None) -> dict[str, Alert]:
    """Conditions that hold now, keyed by what they are about."""
    out: dict[str, Alert] = {}

    def add(key: str, severity: str, message: str, value=None, unit: str = "") -> None:
        out[key] = Alert(key, severity, message, value=value, unit=unit)

    _group_alerts(brokers, now, add)
    _dead_letter_alerts(brokers, add)
    _consumer_alerts(groups, add)
    if flow is not None:
        _flow_alerts(flow, add)

    for b in brokers:
        if b.state == "DOWN":
            add(f"down:{b.name}", "critical", f"{b.name} DOWN: {b.reason or 'no answer'}")
            continue
        if b.failures:
            continue  # a stale row is not fresh evidence of a breach
        if b.mean is not None and b.mean > sla_mean_s:
            add(f"mean:{b.name}", "warning",
                f"{b.name} send average {_ms(b.mean)} > {_ms(sla_mean_s)} (10 s)",
                b.mean * 1000, "ms")
        if b.max is not None and b.max > sla_max_s:
            add(f"max:{b.name}", "critical",
                f"{b.name} send max {_ms(b.max)} > {_ms(sla_max_s)} (10 s)", b.max * 1000, "ms")
        _send_error_alerts(b, add)
        _disk_alerts(b, add)
        _hot_queue_alerts(b, add)
        _delayed_alerts(b, add)
        _access_alerts(b, add)
    for p in producers:
        c = p.counts  # excluded against the cap, as the header and the fuse screen count
        if c.at_cap:
            over = f"; {len(c.overflow)} more isolated serve as overflow (the cap is full: the earliest isolated serve again)" \
                if c.overflow else ""
            add(f"cap:{p.name}", "warning",
                f"fuse of {p.name}: {len(c.excluded)} excluded, at its cap of {c.cap}{over}")
        if not p.up:
            add(f"producer:{p.key}", "warning", f"producer {p.key} not answering: {p.error}")
    return out


DELAYED_OVERDUE_S = 1.0  # the Double-11 talk's "delivered when due": a second late is a fault


def _delayed_alerts(b: Any, add) -> None:
    """Delayed messages left waiting past their due time (delivery stopped or behind)."""
    stats = getattr(b, "stats", None)
    overdue = (getattr(stats, "delayed", None) or {}).get("overdue_s") or 0.0
    if overdue > DELAYED_OVERDUE_S:
        add(f"delayed:{b.name}", "warning",
            f"delayed messages on {b.name} overdue by {overdue:.1f} s "
            f"({stats.delayed.get('pending_total', 0):,} pending)", overdue * 1000, "ms")


DENIED_BURST = 50  # requests refused by the ACL in 10 s: a client misconfigured, or a probe


def _access_alerts(b: Any, add) -> None:
    """A burst of requests the ACL refused, naming who was refused most."""
    access = getattr(getattr(b, "stats", None), "access", None) or {}
    burst = int(access.get("denied_10s") or 0)
    if burst >= DENIED_BURST:
        top = max(access.get("denied") or [{}], key=lambda d: d.get("count", 0))
        who = f"; most: {top.get('user')} {top.get('action')} on {top.get('resource')}" \
            if top else ""
        add(f"acl:{b.name}", "warning",
            f"{b.name} refused {burst:,} requests in 10 s (ACL){who}", burst, "denials")


def _dead_letter_alerts(brokers: Sequence[Any], add) -> None:
    """A consumer group's dead-letter queue growing (its consumers fail messages for
    good): summed over the brokers that hold data (a slave holds its master's copy)."""
    groups: dict[str, list[float]] = {}
    for b in brokers:
        stats = getattr(b, "stats", None)
        if stats is None or b.state == "DOWN" or getattr(b, "role", None) == "SLAVE":
            continue
        for group, d in (getattr(stats, "dead_letters", None) or {}).items():
            total = groups.setdefault(group, [0.0, 0.0])
            total[0] += d.get("count", 0)
            total[1] += d.get("per_s", 0)
    for group, (count, per_s) in sorted(groups.items()):
        if per_s > 0:
            add(f"dlq:{group}", "warning",
                f"dead letters of group {group} growing: {per_s:,.1f}/s, {count:,.0f} in all "
                f"(`floodgate dlq show --group {group}`)", count, "msgs")


def _disk_alerts(b, add) -> None:
    """A data disk past the store's lines (its own, from /stats; RocketMQ's by default):
    past the first the oldest segments go early, past the second sends are refused."""
    ratio = b.disk_used_ratio
    if ratio is None:
        return
    disk = b.stats.disk if b.stats is not None else None
    full = disk.full_ratio if disk and disk.full_ratio else DISK_FULL_RATIO
    high = disk.max_used_ratio if disk and disk.max_used_ratio else DISK_MAX_USED_RATIO
    if ratio > full:
        add(f"disk:{b.name}", "critical", f"{b.name} disk {ratio:.0%} used, over {full:.0%}: "
            "sends are refused DISK_FULL", ratio * 100, "%")
    elif ratio > high:
        add(f"disk:{b.name}", "warning", f"{b.name} disk {ratio:.0%} used, over {high:.0%}: "
            "the oldest segments go early, however young", ratio * 100, "%")


def sends(n: int) -> str:
    """"1 send", "2 sends"."""
    return f"{n:,} send" + ("" if n == 1 else "s")


def _send_error_alerts(b, add) -> None:
    """The sends a broker failed itself (critical: it is FAILING), apart from those it
    refused: the callers' input, the operator's settings (a warning), or sends to a slave,
    which points them to its master (NOT_MASTER: info, the clients' routes catching up
    with a failover). Each with the latest one's words; the refused with the codes it
    has refused since it started."""
    failed = b.send_failures or 0
    if failed:
        add(f"failing:{b.name}", "critical", f"{b.name} failed {sends(failed)} itself (10 s)"
            + (f", latest {b.last_failure}" if b.last_failure else ""), failed, "sends")
    if refused := (b.errors or 0) - failed:
        codes = {c: n for c, n in (b.stats.send_error_codes if b.stats else {}).items()
                 if c not in FAILURE_NAMES}
        since = ", ".join(f"{c} {n:,}" for c, n in sorted(codes.items(), key=lambda i: -i[1]))
        as_slave = b.role == "SLAVE" and b.last_refusal.startswith("NOT_MASTER")
        add(f"refused:{b.name}", "info" if as_slave else "warning",
            f"{b.name} refused {sends(refused)} (10 s)" + (" as a slave" if as_slave else "")
            + (f", latest {b.last_refusal}" if b.last_refusal else "")
            + (f" (since start: {since})" if since else ""), refused, "sends")


def _hot_queue_alerts(b: Any, add) -> None:
    """A queue far hotter than its topic's other queues (the Mogujie talk's 网红 queue)."""
    stats = getattr(b, "stats", None)
    for q in getattr(stats, "hottest_queues", ()):
        if not q.get("hot"):
            continue
        where = f"{q.get('topic')}/{q.get('queue')}"
        add(f"hot:{b.name}:{where}", "warning",
            f"hot queue {where} on {b.name}: {q.get('rate', 0):,.0f} msgs/s, "
            + (f"{q['times_median']:g}x its topic's median queue"
               if q.get("times_median") else "its topic's other queues idle")
            + f" (spread its keys or give {q.get('topic')} more queues)", q.get("rate"),
            "msgs/s")


def _group_alerts(brokers: Sequence[Any], now: float | None, add) -> None:
    """Replicated groups: who is master (leader), whether a slave (follower) is in sync,
    how far behind."""
    groups: dict[str, list[Any]] = {}
    for b in brokers:
        if getattr(b, "group", None) and b.state != "DOWN":
            groups.setdefault(b.group, []).append(b)
    for group, members in sorted(groups.items()):
        masters = [b for b in members if b.role == "MASTER"]
        size = max((_raft_members(b) for b in members), default=0)
        if not masters:
            roles = ", ".join(f"{b.name} {RAFT_ROLES.get(b.role, b.role) if size else b.role}"
                              for b in members)
            add(f"no-master:{group}", "critical",
                f"{group} has no leader ({roles}): {len(members)} of {size} raft members up, "
                f"a leader needs {size // 2 + 1}" if size else
                f"{group} has no master ({roles})")
        for m in masters:
            if size and m.in_sync is not None and m.in_sync + 1 <= size // 2:
                add(f"no-majority:{group}", "critical",
                    f"{group}: leader {m.name} has {m.in_sync + 1} of {size} members with "
                    f"every committed entry, not a majority: sends wait (FLUSH_SLAVE_TIMEOUT)")
            elif not size and m.in_sync == 0:
                sync = m.replication == "sync"
                add(f"no-slave:{group}", "critical" if sync else "warning",
                    f"{group}: master {m.name} has no slave in sync: one copy only"
                    + (" (sends answer SLAVE_NOT_AVAILABLE)" if sync else ""))
            if now is not None and m.role_since is not None and (m.epoch or 0) > 1 \
                    and 0 <= now - m.role_since < FAILOVER_SHOWN_S:
                since = time.strftime('%H:%M:%S', time.localtime(m.role_since))
                add(f"failover:{group}", "warning",
                    f"{group}'s leader moved: {m.name} leads at term {m.epoch} since {since}"
                    + _stepped_aside(members, m.epoch)
                    if size else f"{group} failed over: {m.name} master at epoch {m.epoch} "
                    f"since {since}")
        for b in members:
            if b.repl_lag_s is not None and b.repl_lag_s > REPL_LAG_S:
                behind = "a follower" if _raft_members(b) else "a slave"
                add(f"repl-lag:{b.name}", "warning",
                    f"{b.name}: {behind} is {b.repl_lag_s:.1f} s behind", b.repl_lag_s * 1000,
                    "ms")


def _stepped_aside(members: Sequence[Any], term: int) -> str:
    """Why the leadership moved, when its last leader handed it over (a fuse's word)."""
    for b in members:
        ha = b.stats.ha if getattr(b, "stats", None) is not None else None
        for event in reversed((ha.doc.get("events") or []) if ha is not None else []):
            if isinstance(event, dict) and event.get("kind") == "step-aside" \
                    and event.get("epoch") == term - 1:
                why = str(event.get("detail", "")).partition(": ")[2]
                return f"; {b.name} stepped aside" + (f": {why}" if why else "")
    return ""


def _raft_members(b: Any) -> int:
    """A raft group's size as its member says (0: not a raft group)."""
    ha = b.stats.ha if getattr(b, "stats", None) is not None else None
    members = ha.doc.get("members") if ha is not None else None
    return members if isinstance(members, int) and ha.replication == "raft" else 0


CONSUMER_SEVERITY = {"STALLED": "critical", "STOPPED": "critical", "WARNING": "warning"}


def _consumer_alerts(groups: Sequence[Any], add) -> None:
    """A group judged other than OK, with where its lag is (the worst queues' topics)."""
    for g in groups:
        severity = CONSUMER_SEVERITY.get(g.status)
        if severity is None:
            continue
        where = list(dict.fromkeys(f"{q.topic}@{q.broker}" for q in g.queues_not_ok()))
        why = {"STALLED": "offsets not moving", "STOPPED": "nothing heard from its consumers",
               "WARNING": "lag growing"}[g.status]
        drain = "" if g.drain_s is None or g.status != "WARNING" else \
            f", drains in {g.drain_s:,.0f} s"
        add(f"consumer:{g.name}", severity,
            f"consumer group {g.name} {g.status} ({why}): lag {g.lag:,}{drain}"
            + (f" on {', '.join(where[:3])}" + (" …" if len(where) > 3 else "") if where else ""),
            g.lag, "msgs")


def _flow_alerts(flow, add) -> None:
    """Sends refused by a quota in the last poll, one line per topic and group."""
    brokers: dict[tuple[str, str], list[str]] = {}
    for t in flow.throttled:
        if t.per_s:
            brokers.setdefault((t.topic, t.group), []).append(t.broker)
    for topic, group, total, per_s in flow.by_topic():
        if not per_s:
            continue
        add(f"throttled:{topic}:{group}", "info",
            f"flow control: topic {topic} from "
            f"{f'group {group}' if group else 'producers without a group'} throttled {per_s:,.0f}/s "
            f"({total:,} refused) on {', '.join(sorted(brokers[topic, group]))}", per_s,
            "msgs/s")
