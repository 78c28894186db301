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
        gauge("floodgate_fuse_isolated", "Brokers isolated now (excluded + overflow).",
              snap.isolated_count),
        gauge("floodgate_fuse_excluded", "Brokers choose() skips now (would skip, in dry-run).",
              len(excluded)),
        gauge("floodgate_fuse_overflow", "Isolated brokers serving again because of the cap.",
              len(snap.overflow)),
        gauge("floodgate_fuse_cap", "Most brokers that may be excluded: floor(ratio x N).",
              snap.cap),
        gauge("floodgate_fuse_brokers", "Brokers the fuse knows.", len(snap.brokers)),
        gauge("floodgate_fuse_dry_run", "1 if the fuse only records decisions.",
              1 if snap.dry_run else 0),
        gauge("floodgate_fuse_slow_threshold_seconds",
              "RT over which a call counts as slow right now.", snap.slow_threshold_s),
        MetricFamily("floodgate_fuse_overflow_total", "counter",
                     "Times an isolated broker was put back in service by the cap (rule 4).",
                     (), (((), float(snap.overflow_total)),)),
        MetricFamily("floodgate_fuse_transitions_total", "counter",
                     "Fuse transitions by event (isolate, release, overflow, reexclude).",
                     ("event",),
                     tuple(((event,), float(n)) for event, n in snap.transitions_total.items())),
        MetricFamily("floodgate_fuse_isolations_total", "counter",
                     "Isolations started, by reason (slow, error).", ("reason",),
                     tuple(((reason,), float(n)) for reason, n in snap.isolations_total.items())),
        MetricFamily("floodgate_fuse_broker_isolations_total", "counter",
                     "Isolations started, per broker.", ("broker",),
                     tuple(((b,), float(n)) for b, n in sorted(snap.isolations_by_broker.items()))),
        MetricFamily("floodgate_fuse_excused_total", "counter",
                     "Slow-looking calls not held against their broker: the client was late "
                     "(client-late) or calls to most brokers aged together (aged-together).",
                     ("cause",),
                     tuple(((cause,), float(n)) for cause, n in snap.excused_total.items())),
        *_client_families(snap),
        # one series per isolated broker, so an alert can name the brokers
        MetricFamily("floodgate_fuse_broker_isolated", "gauge",
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
        MetricFamily("floodgate_fuse_client_lateness_seconds", "gauge",
                     "Longest gap in the client's heartbeat over the last 10 s.", (),
                     (((), c.worst_recent_s),)),
        MetricFamily("floodgate_fuse_client_away_seconds_total", "counter",
                     "Time the client itself could not run (late heartbeats), summed.", (),
                     (((), c.away_total_s),)),
    ]
