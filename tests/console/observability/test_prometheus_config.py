"""prometheus.yml and floodgate.rules.yml as written, checked by promtool itself."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from broker_core.cluster.cluster_file import BrokerEntry, ClusterFile
from console.cli import main
from console.observability.errors import ObservabilityError
from console.observability.prometheus_config import (
    BrokerTarget,
    ScrapeSpec,
    parse_addrs,
    prometheus_config,
    write_setup,
)
from console.observability.prometheus_rules import rules_file

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(not PROMTOOL, reason="promtool missing: scripts/setup.sh")


def spec(**kwargs) -> ScrapeSpec:
    brokers = [BrokerTarget("broker-1", "127.0.0.1:10912"),
               BrokerTarget("broker-2", "127.0.0.1:10914")]
    return ScrapeSpec("fg", brokers, ["127.0.0.1:9500"], **kwargs).validate()


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60)


@needs_promtool
def test_promtool_accepts_config_and_rules(tmp_path):
    paths = write_setup(spec(alertmanagers=["127.0.0.1:9093"]), tmp_path)
    checked = promtool("check", "config", str(paths["config"]))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "1 rule files found" in checked.stdout
    rules = promtool("check", "rules", str(paths["rules"]))
    assert rules.returncode == 0, rules.stdout + rules.stderr


def test_every_broker_and_producer_is_a_target_with_its_labels():
    config = prometheus_config(spec())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    brokers = jobs["floodgate-broker"]["static_configs"]
    assert [(s["targets"], s["labels"]) for s in brokers] == [
        (["127.0.0.1:10912"], {"cluster": "fg", "broker": "broker-1"}),
        (["127.0.0.1:10914"], {"cluster": "fg", "broker": "broker-2"}),
    ]
    assert jobs["floodgate-producer"]["static_configs"][0]["targets"] == ["127.0.0.1:9500"]
    assert config["rule_files"] == ["floodgate.rules.yml"]
    assert "alerting" not in config


def test_no_producer_job_without_producers():
    config = prometheus_config(ScrapeSpec("fg", [BrokerTarget("b", "127.0.0.1:1")]).validate())
    assert [j["job_name"] for j in config["scrape_configs"]] == ["floodgate-broker"]


def test_rules_cover_percentiles_rates_and_each_sla_alert():
    groups = {g["name"]: g["rules"] for g in rules_file()["groups"]}
    records = {r["record"] for g in groups.values() for r in g if "record" in r}
    for level in ("broker", "cluster"):
        for q in ("p50", "p99", "p999"):
            assert f"{level}:floodgate_send_latency_seconds:{q}_rate1m" in records
        assert f"{level}:floodgate_messages_in:rate1m" in records
        assert f"{level}:floodgate_messages_out:rate1m" in records
    alerts = {a["alert"]: a for a in groups["floodgate.sla"]}
    assert set(alerts) == {"FloodgateSendAverageOver3ms", "FloodgateSendOver20ms",
                           "FloodgateBrokerDown", "FloodgateBrokerFailingSends",
                           "FloodgateFuseIsolatedAtCap",
                           "FloodgateDiskOver75Percent"}
    for alert in alerts.values():
        notes = alert["annotations"]
        assert notes["summary"] and notes["runbook"].startswith("Runbook:")
        assert "$labels.broker" in notes["description"] or "$labels.producer" in notes[
            "description"]


@pytest.mark.parametrize("bad", [{"scrape_interval": "5 seconds"},
                                 {"evaluation_interval": ""}])
def test_bad_durations_are_refused(bad):
    with pytest.raises(ObservabilityError, match="not a Prometheus duration"):
        spec(**bad)


@pytest.mark.parametrize("text", ["localhost", "127.0.0.1:0", "127.0.0.1:70000", "a b:1"])
def test_bad_addresses_are_refused(text):
    with pytest.raises(ObservabilityError, match="HOST:PORT"):
        parse_addrs(text)


def test_cli_writes_both_files_from_a_cluster_file(tmp_path, capsys):
    cluster = tmp_path / "cluster.toml"
    ClusterFile("fg", [BrokerEntry("broker-1", "127.0.0.1:10911", "127.0.0.1:10912")]).save(
        cluster)
    out = tmp_path / "prom"
    args = ["prometheus", "config", "--cluster", str(cluster), "--producers",
            "127.0.0.1:9500,127.0.0.1:9501", "--out", str(out), "--scrape-interval", "2s"]
    if PROMTOOL:
        args.append("--check")
    assert main(args) == 0
    config = yaml.safe_load((out / "prometheus.yml").read_text())
    assert config["global"] == {"scrape_interval": "2s", "evaluation_interval": "2s"}
    assert config["scrape_configs"][1]["static_configs"][0]["targets"] == [
        "127.0.0.1:9500", "127.0.0.1:9501"]
    assert (out / "floodgate.rules.yml").exists()
    assert "wrote" in capsys.readouterr().out


def test_cli_errors_are_one_line(tmp_path, capsys):
    missing = tmp_path / "nope.toml"
    assert main(["prometheus", "config", "--cluster", str(missing), "--out",
                 str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such cluster file" in err
    cluster = tmp_path / "cluster.toml"
    ClusterFile("fg", [BrokerEntry("b", "127.0.0.1:1", "127.0.0.1:2")]).save(cluster)
    assert main(["prometheus", "config", "--cluster", str(cluster), "--producers", "nohost",
                 "--out", str(tmp_path)]) == 2
    assert "not HOST:PORT" in capsys.readouterr().err
