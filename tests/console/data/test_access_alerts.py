"""The console's alert on a burst of ACL refusals: fires from 50 in 10 s, names the user
refused most and what for; quiet below."""

from __future__ import annotations

from broker_core.observe.stats_doc import BrokerStats
from console.data.alerts import evaluate_alerts
from console.data.state import BrokerSample, build_state


def alerts_for(access: dict) -> dict:
    state = build_state([BrokerSample("broker-1", "broker-1", BrokerStats.from_dict(
        {"broker": "broker-1", "time": 1.0, "access": access}))], now=1)
    return evaluate_alerts(state.brokers, (), 0.02, 0.003)


def test_a_burst_of_refusals_names_who_was_refused():
    denied = [{"user": "app", "action": "pub", "resource": "topic:audit", "count": 70},
              {"user": "ops", "action": "sub", "resource": "group:x", "count": 3}]
    alert = alerts_for({"enforced": True, "denied_10s": 60, "denied": denied})["acl:broker-1"]
    assert alert.severity == "warning"
    assert "refused 60 requests in 10 s" in alert.message
    assert "most: app pub on topic:audit" in alert.message


def test_a_few_refusals_are_no_alert():
    assert "acl:broker-1" not in alerts_for({"enforced": True, "denied_10s": 5, "denied": []})
