"""The SLA alerts on synthetic series, run by `promtool test rules`: each one
pending or silent before its condition holds long enough, firing (with its
summary, a description naming the broker or producer, and its runbook line)
while it holds, and resolved after it stops.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from console.observability.prometheus_config import RULES_FILE, dump_yaml
from console.observability.prometheus_rules import (
    access_alerts,
    consumer_alerts,
    ha_alerts,
    rules_file,
    sla_alerts,
)

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(not PROMTOOL, reason="promtool missing: scripts/setup.sh")

BROKER = {"cluster": "fg", "broker": "broker-1", "instance": "127.0.0.1:10912",
          "job": "floodgate-broker"}
PRODUCER = {"cluster": "fg", "producer": "bench", "instance": "127.0.0.1:9500",
            "job": "floodgate-producer"}
ANNOTATIONS = {a.name: a for a in (*sla_alerts(), *ha_alerts(), *consumer_alerts(),
                                   *access_alerts())}


def series(name: str, labels: dict, values: str) -> dict:
    text = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{text}}}", "values": values}


def render(template: str, labels: dict, value: str, listed: str = "") -> str:
    """The alert templates with $labels and $value filled in, as Prometheus renders them
    (`listed`: what a `range query` loop prints)."""
    text = re.sub(r"\{\{ range .*?\{\{ end \}\}", listed, template)
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)
    return re.sub(r"\{\{ \$value[^}]*\}\}", value, text)


def firing(alert: str, labels: dict, value: str, listed: str = "") -> dict:
    a = ANNOTATIONS[alert]
    return {"exp_labels": {**labels, "severity": a.severity},
            "exp_annotations": {k: render(getattr(a, k), labels, value, listed)
                                for k in ("summary", "description", "runbook")}}


def run_promtool(tmp_path, input_series: list, checks: list, interval: str = "15s") -> None:
    (tmp_path / RULES_FILE).write_text(dump_yaml(rules_file()))
    test = {"rule_files": [RULES_FILE], "evaluation_interval": interval,
            "tests": [{"interval": interval, "input_series": input_series,
                       "alert_rule_test": checks}]}
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    proc = subprocess.run([PROMTOOL, "test", "rules", "test.yml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def check(at: str, alert: str, *expected: dict) -> dict:
    return {"eval_time": at, "alertname": alert, "exp_alerts": list(expected)}


def test_average_send_rt_over_3ms_for_a_minute(tmp_path):
    name = "FloodgateSendAverageOver3ms"
    labels = {k: v for k, v in BROKER.items() if k != "job"}  # the recording rule drops job
    run_promtool(tmp_path, [
        # 100 sends per 15 s: 5 ms each for 2.5 minutes, then 1 ms each
        series("floodgate_send_latency_seconds_count", BROKER, "0+100x30"),
        series("floodgate_send_latency_seconds_sum", BROKER, "0+0.5x10 5+0.1x20"),
    ], [
        check("30s", name),  # over 3 ms, but not yet for a minute
        check("2m", name, firing(name, labels, "5ms")),
        check("5m", name),  # back to 1 ms: resolved
    ])


def test_any_send_over_20ms_fires_at_once_and_resolves_a_minute_later(tmp_path):
    name = "FloodgateSendOver20ms"
    labels = {k: v for k, v in BROKER.items() if k != "job"}
    run_promtool(tmp_path, [
        series("floodgate_send_over_20ms_total", BROKER, "0+0x8 2+0x20"),  # 2 slow at 2m15s
    ], [
        check("2m", name),
        # within one evaluation interval of the sample: at 2m15s itself promtool may
        # evaluate the alert before the recording rule it reads (2 runs in 6 failed)
        check("2m30s", name, firing(name, labels, "2")),
        check("3m", name, firing(name, labels, "2")),  # held while the minute holds it
        check("4m", name),
    ])


def test_broker_down_after_30_seconds(tmp_path):
    name = "FloodgateBrokerDown"
    run_promtool(tmp_path, [series("up", BROKER, "1 1 0 0 0 0 0 1 1 1")], [
        check("15s", name),
        check("30s", name),  # down, pending
        check("75s", name, firing(name, BROKER, "0")),
        check("2m", name),  # back up
    ])


def test_a_broker_failing_sends_pages_at_once_and_resolves_a_minute_later(tmp_path):
    name = "FloodgateBrokerFailingSends"
    labels = {k: v for k, v in BROKER.items() if k != "job"}
    run_promtool(tmp_path, [
        # refused input only (send errors, no failures) for two minutes, then 4 failures
        series("floodgate_send_errors_total", BROKER, "0+3x8 28+3x20"),
        series("floodgate_send_failures_total", BROKER, "0+0x8 4+0x20"),
    ], [
        check("2m", name),  # errors, but none the broker's own: no page
        check("2m30s", name, firing(name, labels, "4")),
        check("4m", name),
    ])


def test_fuse_isolated_at_the_cap_but_not_when_the_cap_is_zero(tmp_path):
    name = "FloodgateFuseIsolatedAtCap"
    small = {**PRODUCER, "instance": "127.0.0.1:9501"}  # 3 brokers: cap 0, never at it
    run_promtool(tmp_path, [
        series("floodgate_fuse_isolated", PRODUCER, "0 1 2 2 1 0"),
        series("floodgate_fuse_cap", PRODUCER, "2x5"),
        series("floodgate_fuse_isolated", small, "0x5"),
        series("floodgate_fuse_cap", small, "0x5"),
        series("floodgate_fuse_broker_isolated",
               {**PRODUCER, "broker": "broker-2", "reason": "slow", "overflow": "false"},
               "_ 1x4"),
        series("floodgate_fuse_broker_isolated",
               {**PRODUCER, "broker": "broker-5", "reason": "error", "overflow": "false"},
               "_ _ 1 1 _ _"),
    ], [
        check("15s", name),
        # the description names the isolated brokers
        check("30s", name, firing(name, PRODUCER, "2",
                                  " broker-2 (slow) broker-5 (error)")),
        check("60s", name),
    ])


def test_disk_over_75_percent_for_a_minute(tmp_path):
    name = "FloodgateDiskOver75Percent"
    run_promtool(tmp_path, [
        series("floodgate_disk_used_ratio", BROKER, "0.5 0.8x6 0.6x4"),
    ], [
        check("30s", name),
        check("90s", name, firing(name, BROKER, "80%")),
        check("2m", name),
    ])


def test_recording_rules_p99_and_rates(tmp_path):
    """A known histogram: 90 sends in (2**-10, 2**-9] s, 10 in (2**-8, 2**-7] s every 15 s."""
    le = {"0.001": "0+0x8", "0.001953125": "0+90x8", "0.00390625": "0+90x8",
          "0.0078125": "0+100x8", "+Inf": "0+100x8"}
    input_series = [series("floodgate_send_latency_seconds_bucket", {**BROKER, "le": k}, v)
                    for k, v in le.items()]
    input_series.append(series("floodgate_messages_in_total", BROKER, "0+150x8"))
    (tmp_path / RULES_FILE).write_text(dump_yaml(rules_file()))
    labels = {k: v for k, v in BROKER.items() if k != "job"}
    test = {"rule_files": [RULES_FILE], "evaluation_interval": "15s", "tests": [{
        "interval": "15s", "input_series": input_series, "promql_expr_test": [
            # p99 is 90 % of the way through the (4 ms, 8 ms] bucket: 4 + 0.9 * 4 ms
            # (in nanoseconds, rounded: promtool compares floats exactly)
            {"expr": "round(broker:floodgate_send_latency_seconds:p99_rate1m * 1e9)",
             "eval_time": "1m",
             "exp_samples": [{"labels": "{" + ",".join(f'{k}="{v}"' for k, v in labels.items())
                              + "}", "value": round(2**-8 * 1.9 * 1e9)}]},
            {"expr": "cluster:floodgate_messages_in:rate1m", "eval_time": "1m",
             "exp_samples": [{"labels": 'cluster:floodgate_messages_in:rate1m{cluster="fg"}',
                              "value": 10}]},
        ]}]}
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    proc = subprocess.run([PROMTOOL, "test", "rules", "test.yml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_half_message_older_than_five_minutes_for_a_minute(tmp_path):
    name = "FloodgateHalfMessageStuck"
    run_promtool(tmp_path, [
        series("floodgate_tx_oldest_half_seconds", BROKER, "200 315 330 345 360 375 390 0x4"),
    ], [
        check("30s", name),
        check("90s", name, firing(name, BROKER, "390")),
        check("2m", name),
    ])


def test_a_burst_of_acl_denials_of_one_user(tmp_path):
    name = "FloodgateAclDenialsBurst"
    labels = {**BROKER, "user": "app", "action": "pub", "resource": "topic:audit"}
    alert_labels = {k: v for k, v in labels.items()
                    if k in ("cluster", "broker", "instance", "user")}
    run_promtool(tmp_path, [
        series("floodgate_acl_denied_total", labels, "0+10x4 40+60x10 640x30"),
    ], [
        check("45s", name),
        check("2m", name, firing(name, alert_labels, "220")),
        check("10m", name),
    ])
