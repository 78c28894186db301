"""Prometheus exposition of a broker: a collector over the broker's own
figures (recording stays in broker_core.observe.recorder; this module only reads).

Latency histograms use classic buckets at powers of two (schema 0, le =
2**-20 .. 2**6 s and +Inf): exact merges of the schema-3 buckets the broker
records, so Prometheus' histogram_quantile and the broker's own percentiles
agree to within one power-of-two bucket.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from broker_core.observe import metric_names as n
from broker_core.observe.snapshot import BrokerSnapshot
from heatmap import LatencyHistogram
from heatmap.layout import PER_OCTAVE, ZERO_INDEX
from heatmap.metrics_log import BROKER_OPS

LE_MIN_EXP = ZERO_INDEX // PER_OCTAVE  # the zero bucket at schema 0: le = 2**-20 s
LE_MAX_EXP = 6  # 64 s; anything slower is counted in +Inf only


def classic_buckets(hist: LatencyHistogram) -> list[tuple[str, float]]:
    """Cumulative (le, count) pairs at le = 2**k, k in [-20, 6], then +Inf."""
    # index k holds (2**(k-1), 2**k]; the zero bucket is index -20 (le = 2**-20)
    coarse = hist.downscale(0).buckets
    out, running = [], 0
    for k in range(LE_MIN_EXP, LE_MAX_EXP + 1):
        running += coarse.get(k, 0)
        out.append((repr(float(2.0**k)), running))
    out.append(("+Inf", hist.count))
    return out


def histogram_family(
    name: str, doc: str, label: str, hist: LatencyHistogram
) -> HistogramMetricFamily:
    fam = HistogramMetricFamily(name, doc, labels=["broker"])
    fam.add_metric([label], classic_buckets(hist), sum_value=hist.sum)
    return fam


class BrokerCollector(Collector):
    """Exports the broker's latest snapshot (`snapshot()` gives it)."""

    def __init__(self, snapshot: Callable[[], BrokerSnapshot]) -> None:
        self.snapshot = snapshot

    def collect(self):
        snap = self.snapshot()
        name = snap.name
        for op in BROKER_OPS:
            yield histogram_family(
                n.latency(op),
                f"Broker-side {op} latency (schema-3 histogram, power-of-two classic export)",
                name,
                snap.cumulative[op],
            )

        def counter(metric, doc, value, **labels):
            keys = ["broker", *labels]
            fam = CounterMetricFamily(metric, doc, labels=keys)
            fam.add_metric([name, *labels.values()], value)
            return fam

        def gauge(metric, doc, value):
            fam = GaugeMetricFamily(metric, doc, labels=["broker"])
            fam.add_metric([name], value)
            return fam

        t = snap.totals
        yield counter(n.MESSAGES_IN, "Messages stored", t.messages_in)
        yield counter(n.MESSAGES_OUT, "Messages delivered by pulls", t.messages_out)
        yield counter(n.BYTES_IN, "Message body bytes stored", t.bytes_in)
        yield counter(n.BYTES_OUT, "Message body bytes delivered", t.bytes_out)
        yield counter(n.SEND_OVER_20MS, "Sends slower than 20 ms (exact count)",
                      t.send_over_20ms)
        yield counter(n.SEND_ERRORS, "Sends answered with an error",
                      snap.errors_total["send"])
        yield counter(n.SEND_FAILURES, "Sends the broker failed itself (an error, busy, disk "
                      "full, a flush or slave timeout), not refusals of the input",
                      snap.failures_total["send"])
        yield counter(n.SYSTEM_BUSY, "Sends refused SYSTEM_BUSY (write path backed up)",
                      t.system_busy)
        disk, cl = snap.disk, snap.commitlog
        yield gauge(n.DISK_USED_RATIO, "Used share of the data disk", disk.used_ratio)
        yield gauge(n.DISK_USED_BYTES, "Used bytes of the data disk", disk.used_bytes)
        yield gauge(n.DISK_TOTAL_BYTES, "Size of the data disk", disk.total_bytes)
        yield gauge(n.STORE_BYTES, "CommitLog bytes on disk", disk.store_bytes)
        yield gauge(n.FLUSH_LAG_BYTES, "CommitLog bytes written but not yet flushed",
                    snap.flush_lag_bytes)
        yield gauge(n.COMMITLOG_MAX_OFFSET, "CommitLog write offset", cl.max_offset)
        yield gauge(n.LOOP_LAG,
                    "Longest the broker's event loop ran late in the last 10 s (requests "
                    "waited that long to be read)", snap.loop_lag.max_10s)
        yield gauge(n.INFLIGHT_WRITES, "Writes in the write path now",
                    snap.inflight_writes)
        yield gauge(n.FAULT_ACTIVE, "1 while a drill fault is injected",
                    1.0 if snap.fault_active else 0.0)
        lag = GaugeMetricFamily(n.CONSUMER_LAG, "Messages not yet consumed per group",
                                labels=["broker", "group"])
        for group, value in sorted(snap.consumer_lag.items()):
            lag.add_metric([name, group], value)
        yield lag
        yield from delayed_families(name, snap.delayed)
        yield from tx_families(name, snap.transactions, snap.locks)
        yield gauge_of(n.PULLS_HELD, "Long polls waiting here for a message", name,
                       snap.pulls.get("held", 0))
        yield gauge_of(n.PULL_SESSIONS, "Consumers' pull sessions kept here", name,
                       snap.pulls.get("sessions", 0))
        ide = snap.idempotence
        yield counter(n.DUPLICATE_SENDS, "Idempotent retries answered from their first "
                      "try (not stored again)", ide.get("duplicates", 0))
        yield counter(n.EXPIRED_SEQUENCES, "Idempotent retries older than this broker "
                      "remembers (SEQUENCE_EXPIRED)", ide.get("expired", 0))
        yield gauge_of(n.IDEMPOTENT_PRODUCERS, "Producers whose recent sequences are kept "
                       "here", name, ide.get("producers", 0))
        yield from access_families(name, snap.access)
        yield dead_letter_family(name, snap.dead_letters)
        yield dead_letter_family(name, snap.retries, n.RETRIES, "Messages a consumer group "
                                 "sent back for a retry, kept in its retry topic")
        yield from consumer_families(name, snap.consumers)
        yield from flow_families(name, snap.flow)
        if snap.ha is not None:
            yield from ha_families(name, snap.ha)


STATUS_VALUES = {"OK": 0.0, "WARNING": 1.0, "STALLED": 2.0, "STOPPED": 3.0}


def consumer_families(name: str, consumers) -> list:
    """Each consumer group's verdict (observe.backlog) and its lag per queue."""
    status = GaugeMetricFamily(n.GROUP_STATUS, "Backlog verdict per group: "
                               "0 OK, 1 WARNING (lag growing), 2 STALLED, 3 STOPPED",
                               labels=["broker", "group"])
    drain = GaugeMetricFamily(n.GROUP_DRAIN, "Time to work off the "
                              "group's lag at its net rate (absent: not catching up, or keeping "
                              "up with a lag it consumes within a second)",
                              labels=["broker", "group"])
    queue_lag = GaugeMetricFamily(n.QUEUE_LAG, "Messages a group has not "
                                  "consumed, per queue", labels=["broker", "group", "topic",
                                                                 "queue"])
    for group, g in sorted(consumers.items()):
        status.add_metric([name, group], STATUS_VALUES.get(g["status"], 0.0))
        if g.get("drain_s") is not None:
            drain.add_metric([name, group], float(g["drain_s"]))
        for q in g["queues"]:
            queue_lag.add_metric([name, group, q["topic"], str(q["queue"])], float(q["lag"]))
    return [status, drain, queue_lag]


def tx_families(name: str, tx, locks) -> list:
    """Transactions (half messages pending, the oldest, checks, commits, rollbacks by
    whom) and orderly consumers' queue locks (held, changes of holder)."""
    out = [gauge_of(n.TX_PENDING, "Half messages neither committed nor rolled back", name,
                    tx.get("pending", 0)),
           gauge_of(n.TX_OLDEST, "Age of the oldest pending half message (0: none)", name,
                    tx.get("oldest_pending_s", 0.0)),
           gauge_of(n.LOCKS_HELD, "Queue locks orderly consumers hold here", name,
                    locks.get("held", 0))]
    for metric, doc, value in (
            (n.TX_COMMITS, "Half messages committed", tx.get("committed_total", 0)),
            (n.TX_CHECKS, "Check-backs of half messages made", tx.get("checks_total", 0)),
            (n.TX_FENCED, "Transactions carrying a consumer group's offsets refused: the "
             "queue was no longer the transform's (FENCED)", tx.get("fenced_total", 0)),
            (n.TX_OFFSET_COMMITS, "Transactions that moved a consumer group's offsets with "
             "their output (exactly once)", tx.get("offsets_committed_total", 0)),
            (n.LOCK_CHANGES, "Queue locks given to a new holder", locks.get("granted_total", 0))):
        fam = CounterMetricFamily(metric, doc, labels=["broker"])
        fam.add_metric([name], float(value or 0))
        out.append(fam)
    rolled = CounterMetricFamily(n.TX_ROLLBACKS, "Half messages rolled back, by who decided "
                                 "(producer, check, operator, checks-exhausted, fenced)",
                                 labels=["broker", "by"])
    for by, count in sorted((tx.get("rolled_back") or {}).items()):
        rolled.add_metric([name, by], float(count))
    out.append(rolled)
    return out


def access_families(name: str, access) -> list:
    """Requests the ACL refused, per user x action x resource, and failed handshakes."""
    denied = CounterMetricFamily(n.ACL_DENIED, "Requests refused NO_PERMISSION by the ACL",
                                 labels=["broker", "user", "action", "resource"])
    for d in access.get("denied") or []:
        denied.add_metric([name, str(d["user"]), str(d["action"]), str(d["resource"])],
                          float(d["count"]))
    failures = CounterMetricFamily(n.AUTH_FAILURES, "Connections whose authentication failed "
                                   "(wrong secret, unknown user, garbled handshake)",
                                   labels=["broker"])
    failures.add_metric([name], float(access.get("auth_failures_total") or 0))
    changes = CounterMetricFamily(n.ACL_CHANGES, "Users and rules added or removed",
                                  labels=["broker"])
    changes.add_metric([name], float(access.get("changes_total") or 0))
    return [denied, failures, changes]


def gauge_of(metric: str, doc: str, broker: str, value) -> GaugeMetricFamily:
    fam = GaugeMetricFamily(metric, doc, labels=["broker"])
    fam.add_metric([broker], float(value or 0))
    return fam


def delayed_families(name: str, delayed) -> list:
    """Delayed messages: pending per level, the oldest overdue one, delivered."""
    pending = GaugeMetricFamily(n.DELAYED_PENDING, "Delayed messages not yet due or not yet "
                                "delivered, per delay level", labels=["broker", "level"])
    for level, count in (delayed.get("pending") or {}).items():
        pending.add_metric([name, level], float(count))
    overdue = GaugeMetricFamily(n.DELAYED_OVERDUE, "How long past its due time the oldest "
                                "undelivered delayed message is (0: none)", labels=["broker"])
    overdue.add_metric([name], float(delayed.get("overdue_s") or 0.0))
    delivered = CounterMetricFamily(n.DELAYED_DELIVERED, "Delayed messages delivered to "
                                    "their queues", labels=["broker"])
    delivered.add_metric([name], float(delayed.get("delivered_total") or 0))
    return [pending, overdue, delivered]


def dead_letter_family(name: str, dead: Mapping, metric: str = n.DEAD_LETTERS,
                       doc: str = "Messages in a consumer group's dead-letter queue (failed "
                                  "max_reconsume times)") -> GaugeMetricFamily:
    fam = GaugeMetricFamily(metric, doc, labels=["broker", "group"])
    for group, d in sorted(dead.items()):
        fam.add_metric([name, group], float(d.get("count", 0)))
    return fam


def flow_families(name: str, flow) -> list:
    """Flow control: sends refused per topic and producer group, and the quotas set."""
    refused = CounterMetricFamily(n.FLOW_THROTTLED, "Sends answered "
                                  "FLOW_CONTROL (over a topic's or group's quota)",
                                  labels=["broker", "topic", "group"])
    for t in flow.get("throttled", []):
        refused.add_metric([name, t["topic"], t["group"]], float(t["count"]))
    quota = GaugeMetricFamily(n.FLOW_QUOTA, "A quota in force, messages/s",
                              labels=["broker", "kind", "target"])
    for q in flow.get("quotas", []):
        quota.add_metric([name, q["kind"], q["target"]], float(q["rate"]))
    return [refused, quota]


def ha_families(name: str, ha) -> list:
    """A replicated group's broker: its role and epoch; a master also its in-sync slaves
    and each slave's lag (bytes and seconds behind)."""
    group = str(ha.get("group", ""))
    role = GaugeMetricFamily(n.HA_ROLE, "1 for the broker's current role in its group",
                             labels=["broker", "group", "role"])
    for r in ("MASTER", "SLAVE", "NONE"):
        role.add_metric([name, group, r], 1.0 if ha.get("role") == r else 0.0)
    epoch = GaugeMetricFamily(n.HA_EPOCH, "The newest epoch of its group the broker "
                              "knows (+1 at every failover)", labels=["broker", "group"])
    epoch.add_metric([name, group], float(ha.get("epoch", 0)))
    out = [role, epoch]
    if ha.get("role") == "MASTER":
        in_sync = GaugeMetricFamily(n.HA_IN_SYNC, "Slaves in the master's "
                                    "in-sync set (0: sends are stored on one copy only)",
                                    labels=["broker", "group"])
        in_sync.add_metric([name, group], float(len(ha.get("in_sync", []))))
        lag_b = GaugeMetricFamily(n.REPL_LAG_BYTES, "CommitLog bytes a slave "
                                  "has not acknowledged", labels=["broker", "group", "slave"])
        lag_s = GaugeMetricFamily(n.REPL_LAG_SECONDS, "Age of the oldest "
                                  "append a slave has not acknowledged",
                                  labels=["broker", "group", "slave"])
        for slave in ha.get("slaves", []):
            lag_b.add_metric([name, group, slave["name"]], float(slave["lag_bytes"]))
            lag_s.add_metric([name, group, slave["name"]], float(slave["lag_s"]))
        out += [in_sync, lag_b, lag_s]
    if ha.get("consensus") == "raft":
        out += raft_families(name, group, ha)
    for key, doc in (("slave_timeouts", "Sync sends answered FLUSH_SLAVE_TIMEOUT"),
                     ("slave_not_available", "Sync sends answered SLAVE_NOT_AVAILABLE")):
        fam = CounterMetricFamily(n.ha_counter(key), doc, labels=["broker", "group"])
        fam.add_metric([name, group], float(ha.get(key, 0)))
        out.append(fam)
    return out


def raft_families(name: str, group: str, ha) -> list:
    """A raft group's member: its group's size, its log's last and committed index; a
    leader also each member's match index (how much of its log they hold)."""
    labels = ["broker", "group"]
    out = []
    for metric, doc, key in ((n.RAFT_MEMBERS, "Members of the broker's raft group", "members"),
                             (n.RAFT_COMMIT, "The last log entry it knows committed", "commit"),
                             (n.RAFT_LAST, "The last entry of its log", "last_index")):
        fam = GaugeMetricFamily(metric, doc, labels=labels)
        fam.add_metric([name, group], float(ha.get(key, 0)))
        out.append(fam)
    if ha.get("role") == "MASTER":
        match = GaugeMetricFamily(n.RAFT_MATCH, "The last entry the leader knows each "
                                  "member holds", labels=[*labels, "replica"])
        for r in ha.get("replicas", []):
            match.add_metric([name, group, r["name"]], float(r["match"]))
        out.append(match)
    return out


def broker_registry(snapshot: Callable[[], BrokerSnapshot]) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(snapshot))
    return registry
