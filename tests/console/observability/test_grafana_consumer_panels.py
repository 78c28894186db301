"""The dashboard's consumer-group and flow-control row: status per group (with
the stall line), time to drain, throttled sends per topic and group."""

from __future__ import annotations

from console.observability.grafana_dashboard import build_dashboard


def test_consumer_and_throttling_panels():
    model = build_dashboard()
    titles = {p["title"]: p for p in model["panels"]}
    assert titles["Consumer groups and flow control"]["type"] == "row"
    status = titles["Consumer group status"]
    assert "floodgate_consumer_group_status" in status["targets"][0]["expr"]
    assert status["fieldConfig"]["defaults"]["max"] == 3
    assert "floodgate_consumer_group_drain_seconds" in \
        titles["Consumer time to drain"]["targets"][0]["expr"]
    throttled = titles["Sends throttled by flow control"]["targets"][0]
    assert throttled["expr"].startswith("sum by (broker, topic, group) (rate(")
    assert "floodgate_flow_control_throttled_total" in throttled["expr"]
