"""A RocketMQ client's message in `floodgate trace` (`cluster up --grpc --grpc-trace-rate
1`): the official Python client sends, a SimpleConsumer receives and acknowledges one
message and leaves the other; the trace shows each send (by that client, through gRPC),
its store, and its pop: acknowledged for the one, "not committed yet" for the other."""

from __future__ import annotations

import pytest

from tests.integration.rocketmq_client_calls import _consumer, _receive_all, _send
from tests.integration.test_trace_e2e import floodgate, trace_json

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_a_rocketmq_clients_send_and_pop_are_in_the_trace(cluster_factory, tmp_path,
                                                          monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # (the client's own logs)
    cluster = cluster_factory(1, grpc=True, grpc_trace_rate=1.0)
    broker = {"grpc": cluster.file.brokers[0].grpc}
    ids = _send(broker, "orders", [{"body": b"paid", "keys": "rmq-paid"},
                                   {"body": b"kept", "keys": "rmq-kept"}])
    consumer = _consumer(broker, "audit", "orders")
    try:
        got = _receive_all(consumer, 2, invisible_s=60, ack=False)
        consumer.ack(next(m for m in got if m.body == b"paid"))
    finally:
        consumer.shutdown()

    def timeline(key: str) -> dict:
        doc = trace_json(cluster.path, "--key", key, until=lambda d: bool(
            d.get("timelines") and d["timelines"][0]["deliveries"]))
        (t,) = doc["timelines"]
        return t

    paid, kept = timeline("rmq-paid"), timeline("rmq-kept")
    for t in (paid, kept):
        assert t["send"]["via"] == "gRPC" and t["send"]["status"] == "SEND_OK"
        assert t["send"]["client"] not in ("", "?")  # the client's own id
        assert t["store"] is not None  # the broker's stored summary covers it
    (pop,) = paid["deliveries"]["audit"]
    assert pop["committed_ms"] >= pop["pulled_ms"] and not paid["missing"]
    (held,) = kept["deliveries"]["audit"]
    assert held["committed_ms"] is None
    assert kept["missing"] == ["delivered to group audit, not committed yet"]
    assert paid["client_id"] == ids[0]  # the id the client knows it by, shown

    text = floodgate("trace", "--cluster", str(cluster.path), "--key", "rmq-paid").stdout
    assert f"its client's id {ids[0]}" in text and "(a RocketMQ client, gRPC)" in text
    assert "popped by group audit" in text and "acknowledged" in text
    proc = floodgate("trace", "--cluster", str(cluster.path), "--id", ids[0])
    assert proc.returncode == 2 and "find the message by its keys" in proc.stderr
