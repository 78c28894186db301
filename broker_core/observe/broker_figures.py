"""`BrokerFigures`: the figures a broker's snapshot holds and its `/stats` sends under
the same name and type, declared once.

`observe.snapshot.BrokerSnapshot` (what the broker took) and
`observe.stats_doc.BrokerStats` (what a console decoded) both extend it; each adds
only what differs between them (the snapshot's histograms, the document's decoded
replication and consumer figures).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker_core.observe.figures import CommitLogFigures, DiskFigures, LoopLagFigures, Totals


@dataclass(frozen=True, kw_only=True)
class BrokerFigures:
    cluster: str = ""
    addr: str = ""
    http: str = ""
    pid: int | None = None
    time: float | None = None  # wall clock, epoch seconds
    uptime_s: float | None = None
    state: str = "UP"  # UP | PAUSED
    flush_mode: str = ""
    totals: Totals = field(default_factory=Totals)
    commitlog: CommitLogFigures = field(default_factory=CommitLogFigures)
    disk: DiskFigures = field(default_factory=DiskFigures)
    consumer_lag: Mapping[str, int] = field(default_factory=dict)  # group -> messages behind
    topics: Mapping[str, int] = field(default_factory=dict)  # topic -> queues
    faults: Mapping[str, Any] = field(default_factory=dict)
    inflight_writes: int | None = None
    loop_lag: LoopLagFigures = field(default_factory=LoopLagFigures)
    # {topic, queue, rate, times_median, depth, hot}: the hottest queues, hottest first, and
    # whether far hotter than the broker's median active queue (observe.queue_heat);
    # bounded, however many queues the broker has
    hottest_queues: tuple[Mapping[str, Any], ...] = ()
    # delayed messages (server.delay_service): {pending: {level label: n}, pending_total,
    # overdue_s, delivered_total, dropped_total}
    delayed: Mapping[str, Any] = field(default_factory=dict)
    # consumer group -> {count, per_s}: its dead letters on this broker and their growth
    dead_letters: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # consumer group -> {count, per_s}: messages it sent back for a retry (kept) and how fast
    retries: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # half messages (server.transactions): {pending, oldest_pending_s, halves_total,
    # committed_total, checks_total, duplicate_ends_total, rolled_back: {by: n}}
    transactions: Mapping[str, Any] = field(default_factory=dict)
    # orderly consumers' queue locks (server.queue_locks): {held, granted_total,
    # expired_total, refused_total, holders: [{group, topic, queue, client_id, since,
    # lease_left_s}]}
    locks: Mapping[str, Any] = field(default_factory=dict)
    # long polls (server.pull_ops): {held, sessions, session_queues}: pulls waiting for a
    # message, consumers' pull sessions kept and the queues they name
    pulls: Mapping[str, Any] = field(default_factory=dict)
    # idempotent sends (server.producer_seqs): {producers, blocks, duplicates, expired,
    # window_s, rebuilt: {records, sends, seconds}}: retries answered from their first try
    idempotence: Mapping[str, Any] = field(default_factory=dict)
    # the ACL (server.access): {enforced, version, users, rules, auth_failures_total,
    # denied: [{user, action, resource, count}]}: names and counts only, never a key
    access: Mapping[str, Any] = field(default_factory=dict)
    # code -> sends answered with it since start (FLOW_CONTROL apart: `flow`)
    send_error_codes: Mapping[str, int] = field(default_factory=dict)
    # {code, text, time}: the latest send the broker failed itself (BROKER_FAILURE_CODES)
    last_send_failure: Mapping[str, Any] = field(default_factory=dict)
    # {code, text, time}: the latest send it refused (the other codes: input, settings,
    # NOT_MASTER)
    last_send_refusal: Mapping[str, Any] = field(default_factory=dict)

    @property
    def fault_active(self) -> bool:
        return bool(self.faults.get("active"))
