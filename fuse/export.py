"""Fuse state as neutral metric families, for an exporter that owns the format.

`fuse` does not import prometheus-client. The producer (broker_core) turns
these into its own Prometheus collector, e.g.::

    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    class FuseCollector:
        def __init__(self, fuse): self.fuse = fuse
        def collect(self):
            for fam in metric_families(self.fuse.snapshot(transitions=False)):
                kind = GaugeMetricFamily if fam.kind == "gauge" else CounterMetricFamily
                name = fam.name.removesuffix("_total") if fam.kind == "counter" else fam.name
                metric = kind(name, fam.help, labels=fam.label_names)
                for labels, value in fam.samples:
                    metric.add_metric(labels, value)
                yield metric

(CounterMetricFamily adds `_total` itself, hence the `removesuffix`.)
"""

from __future__ import annotations

from dataclasses import dataclass

from fuse.state import FuseSnapshot

# the families' names: the console's rules and dashboard import them (counters end in
# _total here, as exposed)
FUSE_ISOLATED = "floodgate_fuse_isolated"
FUSE_EXCLUDED = "floodgate_fuse_excluded"
FUSE_OVERFLOW = "floodgate_fuse_overflow"
FUSE_CAP = "floodgate_fuse_cap"
FUSE_BROKERS = "floodgate_fuse_brokers"
FUSE_DRY_RUN = "floodgate_fuse_dry_run"
FUSE_SLOW_THRESHOLD = "floodgate_fuse_slow_threshold_seconds"
FUSE_OVERFLOW_TOTAL = "floodgate_fuse_overflow_total"
FUSE_TRANSITIONS_TOTAL = "floodgate_fuse_transitions_total"
FUSE_ISOLATIONS_TOTAL = "floodgate_fuse_isolations_total"
FUSE_BROKER_ISOLATIONS_TOTAL = "floodgate_fuse_broker_isolations_total"
FUSE_EXCUSED_TOTAL = "floodgate_fuse_excused_total"
FUSE_BROKER_ISOLATED = "floodgate_fuse_broker_isolated"
FUSE_CLIENT_LATENESS = "floodgate_fuse_client_lateness_seconds"
FUSE_CLIENT_AWAY_TOTAL = "floodgate_fuse_client_away_seconds_total"


@dataclass(frozen=True)
class MetricFamily:
    name: str
    kind: str  # gauge | counter
    help: str
    label_names: tuple[str, ...]
    samples: tuple[tuple[tuple[str, ...], float], ...]  # (label values, value)


def metric_families(snap: FuseSnapshot) -> list[MetricFamily]:
    """floodgate_fuse_* families for one fuse (add a producer label on top if needed)."""

    def gauge(name: str, help_text: str, value: float) -> MetricFamily:
        return MetricFamily(name, "gauge", help_text, (), (((), float(value)),))

    excluded = snap.would_exclude if snap.dry_run else snap.excluded
    return [
        gauge(FUSE_ISOLATED, "Brokers isolated now (excluded + overflow).",
              snap.isolated_count),
        gauge(FUSE_EXCLUDED, "Brokers choose() skips now (would skip, in dry-run).",
              len(excluded)),
        gauge(FUSE_OVERFLOW, "Isolated brokers serving again because of the cap.",
              len(snap.overflow)),
        gauge(FUSE_CAP, "Most brokers that may be excluded: floor(ratio x N).",
              snap.cap),
        gauge(FUSE_BROKERS, "Brokers the fuse knows.", len(snap.brokers)),
        gauge(FUSE_DRY_RUN, "1 if the fuse only records decisions.",
              1 if snap.dry_run else 0),
        gauge(FUSE_SLOW_THRESHOLD,
              "RT over which a call counts as slow right now.", snap.slow_threshold_s),
        MetricFamily(FUSE_OVERFLOW_TOTAL, "counter",
                     "Times an isolated broker was put back in service because the cap was full "
                     "(the earliest isolated serve again).",
                     (), (((), float(snap.overflow_total)),)),
        MetricFamily(FUSE_TRANSITIONS_TOTAL, "counter",
                     "Fuse transitions by event (isolate, release, overflow, reexclude).",
                     ("event",),
                     tuple(((event,), float(n)) for event, n in snap.transitions_total.items())),
        MetricFamily(FUSE_ISOLATIONS_TOTAL, "counter",
                     "Isolations started, by reason (slow, error).", ("reason",),
                     tuple(((reason,), float(n)) for reason, n in snap.isolations_total.items())),
        MetricFamily(FUSE_BROKER_ISOLATIONS_TOTAL, "counter",
                     "Isolations started, per broker.", ("broker",),
                     tuple(((b,), float(n)) for b, n in sorted(snap.isolations_by_broker.items()))),
        MetricFamily(FUSE_EXCUSED_TOTAL, "counter",
                     "Slow-looking calls not held against their broker: the client was late "
                     "(client-late) or calls to most brokers aged together (aged-together).",
                     ("cause",),
                     tuple(((cause,), float(n)) for cause, n in snap.excused_total.items())),
        *_client_families(snap),
        # one series per isolated broker, so an alert can name the brokers
        MetricFamily(FUSE_BROKER_ISOLATED, "gauge",
                     "1 per isolated broker, by reason and whether it overflowed (serves).",
                     ("broker", "reason", "overflow"),
                     tuple(((b.broker, b.reason, "true" if b.overflow else "false"), 1.0)
                           for b in snap.isolated)),
    ]


def _client_families(snap: FuseSnapshot) -> list[MetricFamily]:
    """The client's own lateness (only when it sends heartbeats)."""
    c = snap.client
    if c is None:
        return []
    return [
        MetricFamily(FUSE_CLIENT_LATENESS, "gauge",
                     "Longest gap in the client's heartbeat over the last 10 s.", (),
                     (((), c.worst_recent_s),)),
        MetricFamily(FUSE_CLIENT_AWAY_TOTAL, "counter",
                     "Time the client itself could not run (late heartbeats), summed.", (),
                     (((), c.away_total_s),)),
    ]
