"""The consumer and flow-control alerts (`floodgate.consumers`) on synthetic
series, run by `promtool test rules`: pending, firing with the group's lag by
topic in the description, resolved."""

from __future__ import annotations

import pytest

from tests.console.observability.test_prometheus_rules import (
    PROMTOOL,
    check,
    firing,
    run_promtool,
    series,
)

pytestmark = pytest.mark.skipif(not PROMTOOL, reason="promtool missing: scripts/setup.sh")

BROKER = {"cluster": "fg", "broker": "broker-1", "instance": "127.0.0.1:10912",
          "job": "floodgate-broker"}


def lag(group: str, queue: int, values: str, topic: str = "orders", **labels) -> dict:
    return series("floodgate_consumer_queue_lag",
                  {**BROKER, **labels, "group": group, "topic": topic, "queue": str(queue)},
                  values)


def test_stalled_or_stopped_group_after_30_s(tmp_path):
    name = "FloodgateConsumerStalled"
    audit = {**BROKER, "group": "audit"}
    other = {**BROKER, "instance": "127.0.0.1:10914", "broker": "broker-2", "group": "gone"}
    run_promtool(tmp_path, [
        series("floodgate_consumer_group_status", audit, "0 0 2 2 2 2 2 2 0 0"),
        series("floodgate_consumer_group_status", other, "0 0 3 3 3 3 3 3 3 3"),
        series("floodgate_consumer_group_status", {**BROKER, "group": "billing"}, "1x9"),
        lag("audit", 0, "400x9"),
        lag("audit", 1, "800x9"),
        lag("billing", 0, "7x9"),  # another group's lag is not audit's
        lag("gone", 0, "50x9", instance="127.0.0.1:10914", broker="broker-2"),
    ], [
        check("45s", name),  # pending: not yet 30 s
        check("75s", name, firing(name, audit, "2", " orders 1200"),
              firing(name, other, "3", " orders 50")),
        check("135s", name, firing(name, other, "3", " orders 50")),  # audit moves again
    ])


def test_lag_growing_warns_after_2_minutes(tmp_path):
    name = "FloodgateConsumerLagGrowing"
    billing = {**BROKER, "group": "billing"}
    run_promtool(tmp_path, [
        series("floodgate_consumer_group_status", billing, "1x12 0 0"),
        lag("billing", 0, "100+50x14"),
    ], [
        check("1m", name),
        check("150s", name, firing(name, billing, "1", " orders 600")),
        check("210s", name),
    ])


def test_dead_letters_growing_while_they_grow(tmp_path):
    name = "FloodgateDeadLettersGrowing"
    warehouse = {**BROKER, "group": "warehouse"}
    run_promtool(tmp_path, [
        series("floodgate_dead_letters", warehouse, "0x4 1+1x8 9x30"),
        series("floodgate_dead_letters", {**BROKER, "group": "billing"}, "3x42"),  # flat
    ], [
        check("30s", name),
        check("3m", name, firing(name, warehouse, "8")),
        check("10m", name),  # no more for 5 minutes
    ])


def test_delayed_messages_overdue_for_a_minute(tmp_path):
    name = "FloodgateDelayedOverdue"
    run_promtool(tmp_path, [
        # delivery stops at 1 min: the head grows overdue by 15 s a sample, then catches up
        series("floodgate_delayed_overdue_seconds", BROKER, "0x4 0+15x8 0x4"),
        series("floodgate_delayed_overdue_seconds", {**BROKER, "broker": "broker-2",
                                                     "instance": "127.0.0.1:10914"},
               "0.5x16"),  # half a second late: not an alert
    ], [
        check("90s", name),  # overdue, not yet for a minute
        check("150s", name, firing(name, BROKER, "75.0")),
        check("4m", name),
    ])


def test_throttling_for_5_minutes_is_an_info_alert(tmp_path):
    name = "FloodgateFlowControlThrottling"
    flood = {**BROKER, "topic": "orders", "group": "flood"}
    run_promtool(tmp_path, [
        # 10 refused every 15 s for 10 minutes, then none
        series("floodgate_flow_control_throttled_total", flood, "0+10x40 400x20"),
        series("floodgate_flow_control_throttled_total", {**flood, "group": "calm"}, "0x60"),
    ], [
        check("4m", name),  # throttled, but not yet for 5 minutes
        check("6m", name, firing(name, flood, "0.7")),
        check("13m", name),
    ])


def test_consumer_group_is_in_the_rules_file_with_runbooks():
    from console.observability.prometheus_rules import rules_file

    groups = {g["name"]: g["rules"] for g in rules_file()["groups"]}
    alerts = {a["alert"]: a for a in groups["floodgate.consumers"]}
    assert set(alerts) == {"FloodgateConsumerStalled", "FloodgateConsumerLagGrowing",
                           "FloodgateFlowControlThrottling", "FloodgateDelayedOverdue",
                           "FloodgateDeadLettersGrowing", "FloodgateHalfMessageStuck"}
    assert alerts["FloodgateConsumerStalled"]["labels"]["severity"] == "page"
    assert alerts["FloodgateFlowControlThrottling"]["labels"]["severity"] == "info"
    for name, alert in alerts.items():
        assert alert["annotations"]["runbook"].startswith("Runbook:")
        about = "$labels.broker" if name in ("FloodgateDelayedOverdue",
                                             "FloodgateHalfMessageStuck") else "$labels.group"
        assert about in alert["annotations"]["description"]
