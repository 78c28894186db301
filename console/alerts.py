"""SLA alerts (seed 000): send average over 3 ms, max over 20 ms, a broker
down, a fuse's excluded brokers at its cap.

`evaluate_alerts` says which conditions hold now; `AlertLog.update` turns
that into edges (raised / cleared) kept in a bounded, immutable list, so the
console shows breaches as they happen and the state stays a pure value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_ALERTS = 500


@dataclass(frozen=True)
class Alert:
    key: str  # what the condition is about, e.g. "max:broker-2"
    severity: str  # critical | warning
    message: str
    time: float = 0.0
    cleared: bool = False


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
        before = {a.key: a for a in self.active}
        entries = list(self.entries)
        active = []
        for key, alert in conditions.items():
            if key in before:
                active.append(before[key])
            else:
                raised = Alert(key, alert.severity, alert.message, now)
                entries.append(raised)
                active.append(raised)
        for key, old in before.items():
            if key not in conditions:
                entries.append(Alert(key, old.severity, f"cleared: {old.message}", now, True))
        added = len(entries) - len(self.entries)
        return AlertLog(tuple(entries[-MAX_ALERTS:]), tuple(active), self.total + added)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def evaluate_alerts(brokers: Sequence[Any], producers: Sequence[Any], sla_max_s: float,
                    sla_mean_s: float) -> dict[str, Alert]:
    """Conditions that hold now, keyed by what they are about."""
    out: dict[str, Alert] = {}
    for b in brokers:
        if b.state == "DOWN":
            out[f"down:{b.name}"] = Alert(f"down:{b.name}", "critical",
                                          f"{b.name} DOWN: {b.reason or 'no answer'}")
            continue
        if b.failures:
            continue  # a stale row is not fresh evidence of a breach
        if b.mean is not None and b.mean > sla_mean_s:
            out[f"mean:{b.name}"] = Alert(
                f"mean:{b.name}", "warning",
                f"{b.name} send average {_ms(b.mean)} > {_ms(sla_mean_s)} (10 s)")
        if b.max is not None and b.max > sla_max_s:
            out[f"max:{b.name}"] = Alert(
                f"max:{b.name}", "critical",
                f"{b.name} send max {_ms(b.max)} > {_ms(sla_max_s)} (10 s)")
    for p in producers:
        c = p.counts  # excluded against the cap, as the header and the fuse screen count
        if c.at_cap:
            over = f"; {len(c.overflow)} more isolated serve as overflow (rule 4)" \
                if c.overflow else ""
            out[f"cap:{p.name}"] = Alert(
                f"cap:{p.name}", "warning",
                f"fuse of {p.name}: {len(c.excluded)} excluded, at its cap of {c.cap}{over}")
        if not p.up:
            out[f"producer:{p.key}"] = Alert(f"producer:{p.key}", "warning",
                                             f"producer {p.key} not answering: {p.error}")
    return out

