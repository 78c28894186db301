"""Neutral metric families carry every number the producer's /metrics needs."""

from __future__ import annotations

from fuse import Fuse
from fuse.export import metric_families


def test_metric_families_from_a_snapshot():
    t = [0.0]
    fuse = Fuse([f"b{i}" for i in range(10)], clock=lambda: t[0], seed=1)
    for i in range(4):
        fuse.report(f"b{i}", 0.001, ok=False)
        t[0] += 1
    fams = {f.name: f for f in metric_families(fuse.snapshot())}
    value = {name: f.samples[0][1] for name, f in fams.items() if not f.label_names}
    assert value["floodgate_fuse_isolated"] == 4
    assert value["floodgate_fuse_excluded"] == 3
    assert value["floodgate_fuse_cap"] == 3
    assert value["floodgate_fuse_overflow_total"] == 1
    assert fams["floodgate_fuse_overflow_total"].kind == "counter"
    transitions = dict(fams["floodgate_fuse_transitions_total"].samples)
    assert transitions[("isolate",)] == 4 and transitions[("overflow",)] == 1
    assert dict(fams["floodgate_fuse_isolations_total"].samples)[("error",)] == 4
    per_broker = dict(fams["floodgate_fuse_broker_isolated"].samples)
    assert len(per_broker) == 4 and set(per_broker.values()) == {1.0}
    assert [b for b, _, overflow in per_broker if overflow == "true"] == ["b0"]  # earliest


def test_families_render_with_prometheus_client_in_the_producer_style():
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    fuse = Fuse(["a", "b", "c", "d"], clock=lambda: 0.0)
    fuse.report("a", 0.001, ok=False)

    class Collector:
        def collect(self):
            for fam in metric_families(fuse.snapshot(transitions=False)):
                if fam.kind == "gauge":
                    metric = GaugeMetricFamily(fam.name, fam.help, labels=fam.label_names)
                else:
                    metric = CounterMetricFamily(fam.name.removesuffix("_total"), fam.help,
                                                 labels=fam.label_names)
                for labels, v in fam.samples:
                    metric.add_metric(labels, v)
                yield metric

    registry = CollectorRegistry()
    registry.register(Collector())
    text = generate_latest(registry).decode()
    assert "floodgate_fuse_isolated 1.0" in text
    assert "floodgate_fuse_cap 1.0" in text
    assert 'floodgate_fuse_transitions_total{event="isolate"} 1.0' in text
