"""The dashboard JSON: a current Grafana's schema, the panels the on-call needs,
and queries that parse as the metrics floodgate exports (checked against live
/metrics in tests/integration/test_prometheus_live.py)."""

from __future__ import annotations

import json

import pytest

from console.cli import main
from console.observability.grafana_dashboard import DASHBOARD_UID, build_dashboard, queries
from console.observability.promql import metric_names


@pytest.fixture(scope="module")
def model() -> dict:
    return build_dashboard("Prom-EU")


def panels(model: dict) -> dict[str, dict]:
    return {p["title"]: p for p in model["panels"] if p["type"] != "row"}


def test_schema_of_a_current_grafana(model):
    assert model["schemaVersion"] >= 39  # Grafana 11 writes 39-41
    assert model["uid"] == DASHBOARD_UID and model["title"] == "floodgate cluster"
    assert model.get("id") is None  # Grafana assigns ids
    json.dumps(model)  # plain JSON, no SDK objects left


def test_send_heatmap_reads_classic_buckets_on_a_log2_axis(model):
    heat = panels(model)["Send latency heatmap"]
    assert heat["type"] == "heatmap"
    target = heat["targets"][0]
    assert target["format"] == "heatmap" and target["legendFormat"] == "{{le}}"
    assert "floodgate_send_latency_seconds_bucket" in target["expr"]
    assert heat["options"]["calculate"] is False
    assert heat["options"]["yAxis"]["scaleDistribution"] == {"type": "log", "log": 2}


def test_the_panels_the_issue_asks_for(model):
    titles = panels(model)
    pct = titles["Send RT p50 / p99 / p999 / max per broker"]
    assert [t["expr"].split(",")[0] for t in pct["targets"]] == [
        "histogram_quantile(0.5", "histogram_quantile(0.99", "histogram_quantile(0.999",
        "histogram_quantile(1.0"]
    assert all("by (broker, le)" in t["expr"] for t in pct["targets"])
    for title, metric in [("Messages in per second", "floodgate_messages_in_total"),
                          ("Messages out per second", "floodgate_messages_out_total"),
                          ("Sends over 20 ms", "floodgate_send_over_20ms_total"),
                          ("Disk used", "floodgate_disk_used_ratio"),
                          ("Flush lag", "floodgate_flush_lag_bytes"),
                          ("Consumer lag", "floodgate_consumer_lag")]:
        assert metric in titles[title]["targets"][0]["expr"], title
    failed, refused = titles["Sends failed and refused per second"]["targets"]
    assert metric_names(failed["expr"]) == {"floodgate_send_failures_total"}
    assert metric_names(refused["expr"]) == {"floodgate_send_errors_total",
                                             "floodgate_send_failures_total"}
    fuse = {name for t in titles["Fuse: isolated vs cap, overflow"]["targets"]
            for name in metric_names(t["expr"])}
    assert fuse == {"floodgate_fuse_isolated", "floodgate_fuse_cap", "floodgate_fuse_overflow"}
    assert "floodgate_fuse_broker_isolated" in titles["Isolated brokers"]["targets"][0]["expr"]
    assert {"Brokers up", "Send p99 (selected brokers)", "Sends over 20 ms in range",
            "Messages in per second, total"} <= set(titles)


def test_broker_and_datasource_variables(model):
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["datasource"]["current"]["value"] == "Prom-EU"
    broker = variables["broker"]
    assert broker["type"] == "query" and broker["multi"] and broker["includeAll"]
    assert "label_values(" in broker["query"]
    for panel in panels(model).values():
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for target in panel["targets"]:
            if "broker" in target["expr"] and "{" in target["expr"] and "up{" not in \
                    target["expr"]:
                assert 'broker=~"$broker"' in target["expr"], target["expr"]


def test_panels_do_not_overlap(model):
    cells = set()
    for p in model["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, p["title"]
        cells |= mine


def test_queries_name_only_floodgate_metrics(model):
    names = set().union(*(metric_names(q) for q in queries(model)))
    assert names - {"up"} and all(n.startswith("floodgate_") for n in names - {"up"})


def test_metric_names_reads_past_labels_and_functions():
    expr = ('histogram_quantile(0.99, sum by (broker, le) (rate('
            'floodgate_send_latency_seconds_bucket{broker=~"floodgate_x|$broker"}'
            '[$__rate_interval]))) / on() group_left broker:floodgate_x:p99_rate1m')
    assert metric_names(expr) == {"floodgate_send_latency_seconds_bucket",
                                  "broker:floodgate_x:p99_rate1m"}


def test_cli_writes_the_dashboard(tmp_path, capsys):
    out = tmp_path / "dash.json"
    assert main(["grafana", "dashboard", "--datasource", "Mimir", "--out", str(out)]) == 0
    model = json.loads(out.read_text())
    assert model["templating"]["list"][0]["current"]["text"] == "Mimir"
    assert main(["grafana", "dashboard", "--datasource", " ", "--out", str(out)]) == 2
    assert "datasource" in capsys.readouterr().err
