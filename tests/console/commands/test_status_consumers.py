"""`floodgate status` with consumer groups and flow control: one line per group
(status, lag, drain), the throttling summary, both in --json, and an exit
code that still says only whether the brokers serve."""

from __future__ import annotations

import json

from console.cli import main
from tests.console.tui.test_consumers_screen import BROKER_1, BROKER_2


def recording(tmp_path, *docs):
    (tmp_path / "brokers").mkdir()
    for doc in docs:
        (tmp_path / "brokers" / f"{doc['broker']}.json").write_text(json.dumps(doc))
    return str(tmp_path)


def test_status_lines_per_group_and_throttling(tmp_path, capsys):
    rc = main(["status", "--replay", recording(tmp_path, BROKER_1, BROKER_2)])
    out = capsys.readouterr().out
    assert rc == 0  # both brokers UP: a stalled group is an alert, not a broker fault
    assert "group audit    STALLED  lag 1,200  not draining  (orders)" in out
    assert "group billing  WARNING  lag 40  not draining  (orders)" in out
    assert "flow control: 1 quota on 1 broker; throttled 4,321 since the brokers started" in out
    assert "throttled topic orders from group flood: 4,321" in out
    assert "alert consumer group audit STALLED (offsets not moving): lag 1,200" in out


def test_status_json_has_groups_queues_and_flow_control(tmp_path, capsys):
    rc = main(["status", "--replay", recording(tmp_path, BROKER_1, BROKER_2), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    groups = {g["group"]: g for g in data["consumers"]}
    assert list(groups) == ["audit", "billing"]
    assert groups["audit"]["status"] == "STALLED" and groups["audit"]["drain_s"] is None
    assert groups["billing"]["brokers"] == ["broker-1", "broker-2"]
    assert groups["billing"]["lag"] == 40 and len(groups["billing"]["queues"]) == 2
    assert {"broker": "broker-2", "topic": "orders", "queue": 0, "committed": 960, "end": 1000,
            "lag": 40, "status": "WARNING"} in groups["billing"]["queues"]
    flow = data["flow_control"]
    assert flow["throttled_total"] == 4321
    assert flow["quotas"] == [{"broker": "broker-1", "kind": "topic", "target": "orders",
                               "rate": 500.0, "burst": 50.0, "warmup_s": 0.0}]
    assert flow["throttled"] == [{"broker": "broker-1", "topic": "orders", "group": "flood",
                                  "total": 4321}]


def test_status_without_groups_prints_no_group_lines(tmp_path, capsys):
    rc = main(["status", "--replay", recording(tmp_path, {"broker": "b", "time": 1.0})])
    out = capsys.readouterr().out
    assert rc == 0 and "group " not in out and "flow control" not in out


def test_a_steady_lag_judged_ok_is_keeping_up(tmp_path, capsys):
    from tests.console.tui.test_consumers_screen import group, queue

    steady = {"broker": "b", "time": 1.0,
              "consumers": {"billing": group("OK", 5, [queue("orders", 0, 95, 100)])}}
    assert main(["status", "--replay", recording(tmp_path, steady)]) == 0
    assert "group billing  OK       lag 5  keeping up  (orders)" in capsys.readouterr().out


def test_a_lag_that_grows_is_not_keeping_up_even_judged_ok(tmp_path, capsys):
    from tests.console.tui.test_consumers_screen import group, queue

    # after an offset reset: the lag rose 3,000 in one step, too few samples for WARNING
    reset = {"broker": "b", "time": 1.0,
             "consumers": {"billing": group("OK", 3000, [queue("orders", 0, 2800, 5800)],
                                            trend=1200.0)}}
    assert main(["status", "--replay", recording(tmp_path, reset)]) == 0
    out = capsys.readouterr().out
    assert "group billing  OK       lag 3,000  lag growing  (orders)" in out
    assert "keeping up" not in out


def test_status_wording_for_one_broker_no_fuse_and_no_group(tmp_path, capsys):
    """Rough edge 8: `1 brokers`, `excluded 0/-` (no producer watched) and `from group :`
    (sends without a producer group) read as mistakes."""
    import copy

    doc = copy.deepcopy(BROKER_1)
    doc["flow"]["throttled"] = [{"topic": "orders", "group": "", "count": 7}]
    main(["status", "--replay", recording(tmp_path, doc)])
    out = capsys.readouterr().out
    assert " 1 broker " in out and "1 brokers" not in out
    assert "fuse: no producer watched" in out and "excluded 0/-" not in out
    assert "throttled topic orders from producers without a group: 7" in out
