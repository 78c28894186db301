"""The fuse's per-broker state and the neutral snapshot it hands to exporters.

The snapshot is plain frozen data: `/stats` dumps `to_dict()`, a Prometheus
collector reads the numbers (see `fuse.export`), the TUI draws it. Nothing in
here knows about HTTP, Prometheus or the console.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fuse.lateness import LatenessFigures

EVENTS = ("isolate", "release", "overflow", "reexclude")
REASONS = ("slow", "error")


@dataclass(slots=True, eq=False)
class BrokerState:
    """Mutable state of one broker; only the fuse touches it, under its lock
    (the RT average is updated without the lock: a lost update is harmless)."""

    name: str
    ewma_s: float = 0.0
    samples: int = 0
    isolated: bool = False
    overflow: bool = False
    reason: str = ""  # of the latest offence
    cause: str = ""  # what isolated it: the reason of its first offence this isolation
    since: float = 0.0
    until: float = 0.0
    last_offence: float = 0.0
    offences: int = 0
    duration_s: float = 0.0
    repeats: int = 0
    released_at: float | None = None
    suspect_since: float = float("-inf")  # first slow call of the current suspicion
    suspect_calls: int = 0
    worst_rt_s: float = 0.0  # slowest call of this isolation, to re-judge it later
    episode_errors: int = 0
    # what every offence of this isolation got, when it was the same failure each time
    # ("" when they differed, or one was slow): `Fuse.release_if` ends such an isolation
    # when its caller knows the cause is gone
    episode_why: str = ""
    # the cause release_if last said was gone, and when: a call begun before that and
    # answered with it afterwards is the old cause, held against nobody
    pardoned_why: str = ""
    pardoned_at: float = float("-inf")
    isolations: int = 0  # times isolated since the fuse started
    sluggish_at: float = float("-inf")  # last answer older than aged_fraction x the line
    sluggish_s: float = 0.0  # ... and how long it took
    seen_at: float = float("-inf")  # last answer of any kind
    first_seen: float = float("-inf")  # first answer
    stuck: int = 0  # calls in flight past stuck_factor x the line
    # when `add_broker` added this name (-inf: one the fuse started with): a call that
    # started before went to what the name stood for then (a failed-over master)
    joined_at: float = float("-inf")


@dataclass(frozen=True, slots=True)
class Transition:
    time: float
    broker: str
    event: str  # isolate | release | overflow | reexclude
    # slow | error (isolate); expired | removed | cluster-slow | rejudged or the caller's own
    # (release_if: in-sync) (release); cap (overflow, reexclude)
    reason: str
    detail: str = ""  # an isolation's evidence: the call's wait against the line, or its error

    def to_dict(self) -> dict[str, Any]:
        doc = {"time": self.time, "broker": self.broker, "event": self.event,
               "reason": self.reason}
        if self.detail:
            doc["detail"] = self.detail
        return doc


@dataclass(frozen=True, slots=True)
class IsolatedBroker:
    broker: str
    reason: str  # of the latest offence: slow | error
    since: float  # start of this isolation (orders the list; rule 4 uses it)
    until: float
    left_s: float
    overflow: bool  # isolated but serving because of the cap
    offences: int
    repeats: int
    cause: str = ""  # what isolated it (the transition's reason): slow | error

    def to_dict(self) -> dict[str, Any]:
        return {"broker": self.broker, "reason": self.reason, "cause": self.cause,
                "since": self.since, "until": self.until, "left_s": self.left_s,
                "overflow": self.overflow, "offences": self.offences, "repeats": self.repeats}


@dataclass(frozen=True)
class FuseSnapshot:
    """The fuse at one instant of its clock.

    `isolated` is ordered by isolation time, earliest first; `excluded` is what
    `choose` skips (empty in dry-run, where `would_exclude` says what it would
    skip); `overflow` are isolated brokers serving again because of the cap.
    """

    time: float
    brokers: tuple[str, ...]
    cap: int
    dry_run: bool
    isolated: tuple[IsolatedBroker, ...]
    excluded: frozenset[str]
    would_exclude: frozenset[str]
    overflow: frozenset[str]
    slow_threshold_s: float
    baseline_s: float | None
    cluster_slow: bool
    inflight: int
    isolations_total: Mapping[str, int]
    transitions_total: Mapping[str, int]
    overflow_total: int
    transitions: tuple[Transition, ...] = field(default=())
    isolations_by_broker: Mapping[str, int] = field(default_factory=dict)
    # slow-looking calls not held against their broker: the client was late
    # ("client-late"), or calls to most brokers aged together ("aged-together")
    excused_total: Mapping[str, int] = field(default_factory=dict)
    client: LatenessFigures | None = None  # None: the client never beat (resting: kept)
    colocated: frozenset[str] = frozenset()  # brokers on the client's own host

    @property
    def isolated_count(self) -> int:
        return len(self.isolated)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; sets become sorted lists, transitions oldest first."""
        return {
            "time": self.time,
            "brokers": list(self.brokers),
            "cap": self.cap,
            "dry_run": self.dry_run,
            "isolated_count": self.isolated_count,
            "isolated": [entry.to_dict() for entry in self.isolated],
            "excluded": sorted(self.excluded),
            "would_exclude": sorted(self.would_exclude),
            "overflow": sorted(self.overflow),
            "slow_threshold_s": self.slow_threshold_s,
            "baseline_s": self.baseline_s,
            "cluster_slow": self.cluster_slow,
            "inflight": self.inflight,
            "isolations_total": dict(self.isolations_total),
            "transitions_total": dict(self.transitions_total),
            "overflow_total": self.overflow_total,
            "transitions": [t.to_dict() for t in self.transitions],
            "isolations_by_broker": dict(self.isolations_by_broker),
            "excused_total": dict(self.excused_total),
            "client": self.client.to_dict() if self.client is not None else None,
            "colocated": sorted(self.colocated),
        }
