"""`BrokerSnapshot`: the broker's figures at one instant, taken once per tick.

The three exporters (`/stats`, `/metrics`, the metrics log) read a snapshot
and nothing else of the broker, the way `fuse.state` + `fuse.export` work:
recording stays in the broker, formats stay in the exporters, and a slow or
frequent poll costs the broker's event loop a lookup, not a recomputation.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker_core.observe.broker_figures import BrokerFigures
from broker_core.observe.figures import (
    CommitLogFigures,
    DiskFigures,
    LoopLagFigures,
    OpWindow,
    Totals,
)
from broker_core.observe.recorder import WINDOWS_S, ClosedSecond, summarize
from broker_core.protocol.system_topics import DLQ_PREFIX, RETRY_PREFIX
from heatmap import LatencyHistogram

MAX_LOCKS_SHOWN = 200  # queue locks a snapshot lists (all are counted)


@dataclass(frozen=True, kw_only=True)
class BrokerSnapshot(BrokerFigures):
    """What the broker took at one instant: the shared figures (observe.broker_figures)
    and its per-second and since-start histograms."""

    name: str
    windows: Mapping[str, Mapping[str, OpWindow]]  # op -> "10s" -> figures
    errors_total: Mapping[str, int]  # per op: answered with an error, since start
    failures_total: Mapping[str, int]  # per op: of those, the broker's own failures
    history: tuple[ClosedSecond, ...]  # the last minutes, oldest first (immutable seconds)
    cumulative: Mapping[str, LatencyHistogram]  # per op since start, copies
    # a replicated group's broker: role, epoch, in-sync set, per-slave lag (ha.node figures)
    ha: Mapping[str, Any] | None = None
    # consumer groups judged by observe.backlog (empty on a slave: its master judges them)
    consumers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    flow: Mapping[str, Any] = field(default_factory=dict)  # quotas in force, throttled sends

    @property
    def flush_lag_bytes(self) -> int:
        return int(self.commitlog.max_offset or 0) - int(self.commitlog.flushed_offset or 0)

    def last_seconds(self, n: int) -> tuple[ClosedSecond, ...]:
        return self.history[-n:] if n > 0 else ()


def disk_figures(data_dir, store_bytes: int, config) -> DiskFigures:
    """The data disk now, and the store's lines on it (`config`: its StoreConfig)."""
    usage = shutil.disk_usage(data_dir)
    return DiskFigures(used_bytes=usage.used, total_bytes=usage.total,
                       used_ratio=usage.used / usage.total if usage.total else 0.0,
                       store_bytes=store_bytes, max_used_ratio=config.disk_max_used_ratio,
                       full_ratio=config.disk_full_ratio)


def dead_letters(broker, prefix: str = DLQ_PREFIX) -> dict[str, dict[str, float]]:
    """Each group's dead letters here (%DLQ%<group>; or, with RETRY_PREFIX, the messages
    it sent back for a retry) and their rate over the last seconds."""
    out = {}
    for topic, queues in broker.topics.queues.items():
        if not topic.startswith(prefix):
            continue
        count = 0
        for qid in range(queues):
            lo, hi = broker.store.queue_offsets(topic, qid)
            count += hi - lo
        out[topic[len(prefix):]] = {"count": count,
                                        "per_s": round(broker.heat.topic_rate(topic, queues), 3)}
    return out


def consumers_report(broker) -> dict[str, dict]:
    """The consumer groups' backlog verdicts (none on a slave: its groups read the master)."""
    if broker.ha is not None and broker.ha.role.value == "SLAVE":
        return {}
    return broker.backlog.report(broker.broadcast.instances(), broker.tx.transform_groups)


def hottest_report(broker) -> tuple[dict, ...]:
    """The hottest queues here, with their depth (observe.queue_heat)."""
    store = broker.store
    return tuple(broker.heat.report(lambda t, q: (o := store.queue_offsets(t, q))[1] - o[0],
                                    lambda t: broker.topics.queues.get(t, 0)))


def take_snapshot(broker, consumers: dict[str, dict] | None = None,
                  hottest: tuple[dict, ...] | None = None) -> BrokerSnapshot:
    """The broker's figures now, through its public parts only (`consumers` and
    `hottest`: those reports when the caller made them a step before)."""
    cfg, rec, store = broker.config, broker.recorder, broker.store
    st = store.stats()
    now = broker.clock()
    totals = Totals(
        messages_in=rec.msgs_total["send"], messages_out=rec.msgs_total["pull"],
        bytes_in=rec.bytes_total["send"], bytes_out=rec.bytes_total["pull"],
        send_over_20ms=rec.over_sla_total["send"], system_busy=broker.write_path.busy_refusals,
        flow_control=sum(broker.flow.throttled.values()), **broker.counters)
    return BrokerSnapshot(
        name=cfg.name, cluster=cfg.cluster, addr=cfg.addr, http=cfg.http_addr, pid=os.getpid(),
        time=now, uptime_s=now - broker.started,
        state="PAUSED" if broker.faults.pause_left() else "UP", flush_mode=cfg.flush,
        windows={op: {f"{w}s": summarize(rec.window(op, w), w) for w in WINDOWS_S}
                 for op in rec.ops},
        totals=totals, errors_total=dict(rec.errors_total),
        failures_total=dict(rec.failures_total),
        commitlog=CommitLogFigures(**st["commitlog"]),
        disk=disk_figures(cfg.data_dir, st["disk"]["bytes_on_disk"], store.config),
        consumer_lag=broker.consumer_lag(), topics=dict(broker.topics.queues),
        faults=broker.faults.describe(), inflight_writes=broker.write_path.inflight,
        loop_lag=LoopLagFigures(max_10s=broker.loop_lag.worst(10),
                                max_60s=broker.loop_lag.worst(60),
                                late_total=broker.loop_lag.late_total),
        history=tuple(rec.history), cumulative={op: h.copy() for op, h in rec.total.items()},
        ha=broker.ha.figures() if broker.ha is not None else None,
        consumers=consumers_report(broker) if consumers is None else consumers,
        flow=broker.flow.describe(),
        delayed=broker.delay.figures(),
        dead_letters=dead_letters(broker),
        retries=dead_letters(broker, RETRY_PREFIX),
        transactions=broker.tx.figures(),
        locks={**broker.locks.figures(), "holders": broker.locks.holders()[:MAX_LOCKS_SHOWN]},
        pulls=broker.pulls.figures(),
        idempotence=broker.sends.idempotent.seqs.figures(),
        access=broker.access.figures(),
        hottest_queues=hottest_report(broker) if hottest is None else hottest,
        send_error_codes=dict(broker.sends.error_codes),
        last_send_failure=dict(broker.sends.last_failure),
        last_send_refusal=dict(broker.sends.last_refusal),
    )
