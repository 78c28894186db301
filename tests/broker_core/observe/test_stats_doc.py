"""/stats as a typed contract: BrokerStats and ProducerStats survive a round trip
through their documents, and decoding is lenient (a newer broker's extra
fields, an older one's missing fields and plain garbage never raise)."""

from __future__ import annotations

import json

import pytest

from broker_core.observe.figures import (
    CommitLogFigures,
    DiskFigures,
    LoopLagFigures,
    OpWindow,
    Totals,
)
from broker_core.observe.stats_doc import BrokerStats, ProducerStats
from heatmap import LatencyHistogram


def hist(*values: float) -> LatencyHistogram:
    h = LatencyHistogram()
    h.record_many(values)
    return h


FULL = BrokerStats(
    broker="broker-1", cluster="c1", addr="127.0.0.1:9001", http="127.0.0.1:9101", pid=42,
    time=1_794_355_200.5, uptime_s=12.0, state="UP", flush_mode="async",
    ops={"send": {"1s": OpWindow(count=3, rate=3.0, msgs_per_s=3.0, bytes_per_s=300.0,
                                 errors=0, over_20ms=1, mean=0.01, p50=0.001, p99=0.03,
                                 p999=0.03, max=0.031),
                  "10s": OpWindow(count=30, msgs_per_s=3.0)},
         "flush": {"10s": OpWindow(p99=0.002, max=0.004)}},
    history={"send": ((1_794_355_198, hist(0.001, 0.002)), (1_794_355_199, hist())),
             "flush": ((1_794_355_199, hist(0.004)),)},
    totals=Totals(messages_in=30), commitlog=CommitLogFigures(max_offset=4096, segments=1),
    flush_lag_bytes=128, disk=DiskFigures(used_ratio=0.25, total_bytes=10**12),
    consumer_lag={"g1": 7}, topics={"orders": 4}, faults={"active": True, "stall_ms": 800.0},
    inflight_writes=2, loop_lag=LoopLagFigures(max_10s=0.001, late_total=3))


def test_broker_stats_round_trip_through_json():
    doc = json.loads(json.dumps(FULL.to_dict()))
    back = BrokerStats.from_dict(doc)
    assert back == FULL
    assert back.to_dict() == FULL.to_dict()
    assert back.window("send", "1s").p99 == 0.03 and back.fault_active


def test_producer_stats_round_trip():
    full = ProducerStats("bench", 1.5, {"cap": 1, "excluded": ["broker-2"]},
                         {"sends": 10, "window_s": 10},
                         {"flow_control": 12.0, "flow_control_gave_up": 1.0, "backoff_s": 0.4})
    assert ProducerStats.from_dict(json.loads(json.dumps(full.to_dict()))) == full
    bare = ProducerStats("bench", 1.5)  # no fuse, no load generator
    assert ProducerStats.from_dict(bare.to_dict()) == bare and "load" not in bare.to_dict()


def test_unknown_fields_are_ignored():
    doc = FULL.to_dict()
    doc["replication"] = {"role": "master"}  # what a newer broker may add
    doc["ops"]["send"]["10s"]["p9999"] = 0.5
    doc["history"]["send"][0]["exemplars"] = [1, 2]
    assert BrokerStats.from_dict(doc) == FULL
    assert ProducerStats.from_dict({"producer": "p", "trace": {}}) == ProducerStats("p")


def test_missing_fields_take_their_defaults():
    assert BrokerStats.from_dict({}) == BrokerStats()
    stats = BrokerStats.from_dict({"broker": "old", "ops": {"send": {"10s": {"p99": 0.001}}}})
    assert stats.broker == "old" and stats.state == "UP" and stats.pid is None
    assert stats.window("send", "10s") == OpWindow(p99=0.001)
    assert stats.window("pull", "10s") == OpWindow()  # an op nobody sent
    assert stats.history == {} and stats.disk == DiskFigures() and not stats.fault_active
    assert ProducerStats.from_dict({}) == ProducerStats()


@pytest.mark.parametrize("doc", [
    None, [], "x", 3, {"broker": 3, "pid": "42", "time": True, "ops": "nope"},
    {"ops": {"send": [1], "pull": {"10s": [1]}, "flush": {"10s": {"count": "many"}}}},
    {"ops": {"send": {"10s": {"count": float("inf"), "errors": float("nan"), "p99": "slow",
                              "over_20ms": 10**400, "max": True}}}},
    {"history": "x"}, {"history": {"send": "x", "pull": [None, 5, {"ts": "x"}]}},
    {"history": {"send": [{"ts": 1, "buckets": "?"}, {"ts": 2, "count": 1, "buckets": {"3": 1}},
                          {"ts": 3, "count": 1, "buckets": {"3": 1}, "min": [], "max": 1},
                          {"ts": 4, "count": 1, "buckets": {"x": 1}, "min": 0, "max": 1},
                          {"ts": 5, "count": 2, "buckets": {"3": 1}, "min": 0, "max": 1},
                          {"ts": 6, "buckets": {"3": -1}}, {"ts": 7, "schema": 9},
                          {"ts": 8, "count": 1, "buckets": {"3": 1e400}, "min": 0, "max": 1}]}},
    {"totals": [1], "commitlog": {"max_offset": "big"}, "disk": {"used_ratio": 10**400},
     "consumer_lag": {"g": None, "h": 2.5}, "faults": "on", "loop_lag": None},
])
def test_wrong_types_never_raise(doc):
    stats = BrokerStats.from_dict(doc)
    assert isinstance(stats, BrokerStats)
    ints = (*stats.totals.to_dict().values(), *stats.commitlog.to_dict().values(),
            *stats.consumer_lag.values())
    assert all(v is None or type(v) is int for v in ints)
    for seconds in stats.history.values():
        assert all(isinstance(ts, int) and isinstance(h, LatencyHistogram) for ts, h in seconds)
    assert stats.history.get("send", ()) == ()  # every malformed second above is dropped
    json.dumps(stats.to_dict(), allow_nan=True)  # what was kept exports again
    assert isinstance(ProducerStats.from_dict(doc), ProducerStats)


def test_figures_keep_their_kinds():
    w = OpWindow.from_dict({"count": 3.0, "p99": 1, "errors": 2.9, "max": 0.5})
    assert (w.count, w.p99, w.errors, w.max) == (3, 1.0, 2, 0.5)
    assert type(w.count) is int and type(w.p99) is float


def test_history_can_be_limited_to_the_ops_a_reader_draws():
    stats = BrokerStats.from_dict(FULL.to_dict(), history_ops=("send",))
    assert list(stats.history) == ["send"] and stats.history["send"] == FULL.history["send"]
    assert stats.ops == FULL.ops  # only the history is limited
