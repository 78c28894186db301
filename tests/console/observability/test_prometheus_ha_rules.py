"""The replication alerts on synthetic series, run by `promtool test rules`."""

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

MASTER = {"cluster": "fg", "broker": "group-1-b", "instance": "127.0.0.1:10915",
          "job": "floodgate-broker", "group": "group-1"}


def test_slave_lag_over_a_second_for_30_s(tmp_path):
    name = "FloodgateReplicationLag"
    labels = {**MASTER, "slave": "group-1-a"}
    run_promtool(tmp_path, [series("floodgate_replication_lag_seconds", labels,
                                   "0 2 2 2 2 2 0 0")], [
        check("15s", name),  # pending
        check("60s", name, firing(name, labels, "2s")),
        check("105s", name),
    ])


def test_master_without_a_slave_in_sync(tmp_path):
    name = "FloodgateNoSlaveInSync"
    run_promtool(tmp_path, [series("floodgate_ha_in_sync_slaves", MASTER, "1 0 0 0 1")], [
        check("15s", name),
        check("30s", name, firing(name, MASTER, "0")),
        check("60s", name),
    ])


def test_failover_shows_on_the_new_master_for_five_minutes(tmp_path):
    name = "FloodgateFailover"
    old = {**MASTER, "broker": "group-1-a", "instance": "127.0.0.1:10912"}
    run_promtool(tmp_path, [
        series("floodgate_ha_epoch", MASTER, "1 1 2x30"),
        series("floodgate_ha_role", {**MASTER, "role": "MASTER"}, "0 0 1x30"),
        series("floodgate_ha_epoch", old, "1 1 2x30"),  # the old one, back as slave
        series("floodgate_ha_role", {**old, "role": "MASTER"}, "1 1 0x30"),
    ], [
        check("15s", name),
        check("60s", name, firing(name, MASTER, "1")),
        check("6m", name),
    ])
