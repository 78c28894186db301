"""The three exporters of one BrokerSnapshot agree: /stats (stats_doc), /metrics
(the Prometheus collector) and what the tick closed for the metrics log."""

import asyncio

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker_core import protocol as p
from broker_core.observe.prometheus import broker_registry, classic_buckets
from broker_core.observe.stats_doc import BrokerStats, stats_document
from broker_core.protocol import Op
from heatmap import LatencyHistogram


@pytest.fixture
def broker(broker):
    """The shared broker after 30 sends and one tick."""
    b = broker
    body = p.encode_send("orders", -1, p.OutMessage(b"x" * 100))
    for _ in range(30):
        asyncio.run(b.handle(p.Header(op=Op.SEND, request_id=1, length=len(body)), body))
    b.clock.t += 1
    b.tick()
    return b


def samples(broker) -> dict:
    text = generate_latest(broker_registry(broker.snapshot)).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_metrics_and_stats_read_the_same_snapshot(broker):
    doc = stats_document(broker.snapshot(), history_s=10)
    m = samples(broker)
    b = (("broker", "b1"),)
    assert m[("floodgate_messages_in_total", b)] == doc["totals"]["messages_in"] == 30
    assert m[("floodgate_bytes_in_total", b)] == 3000
    assert m[("floodgate_send_latency_seconds_count", b)] == 30
    assert m[("floodgate_commitlog_max_offset", b)] == doc["commitlog"]["max_offset"]
    assert doc["ops"]["send"]["1s"]["count"] == 30


def test_stats_document_decodes_back_to_the_same_figures(broker):
    doc = stats_document(broker.snapshot(), history_s=10)
    stats = BrokerStats.from_dict(doc)
    assert stats.to_dict() == doc
    assert stats.window("send", "1s").count == 30
    (ts, hist), = stats.history["send"]
    assert ts == int(broker.clock.t) - 1 and hist.count == 30


def test_classic_buckets_are_cumulative_and_end_at_the_count():
    h = LatencyHistogram()
    h.record_many([1e-4, 2e-3, 2e-3, 0.5])
    pairs = classic_buckets(h)
    counts = [c for _, c in pairs]
    assert counts == sorted(counts) and pairs[-1] == ("+Inf", 4)
    assert dict(pairs)[repr(2.0**-13)] == 1  # 1e-4 s <= 2**-13 s (122 us)
    assert dict(pairs)[repr(2.0**-8)] == 3  # both 2 ms sends under 3.9 ms


def test_retries_and_dead_letters_per_group_in_stats_and_metrics(broker):
    for topic, n in (("%RETRY%billing", 3), ("%DLQ%billing", 2)):
        body = p.encode_send(topic, 0, p.OutMessage(b"failed"))
        for _ in range(n):
            asyncio.run(broker.handle(p.Header(op=Op.SEND, request_id=1, length=len(body)), body))
    broker.clock.t += 1
    broker.tick()
    doc = stats_document(broker.snapshot(), history_s=10)
    assert doc["retries"]["billing"]["count"] == 3
    assert doc["dead_letters"]["billing"]["count"] == 2
    m = samples(broker)
    g = (("broker", "b1"), ("group", "billing"))
    assert m[("floodgate_retries", g)] == 3
    assert m[("floodgate_dead_letters", g)] == 2
