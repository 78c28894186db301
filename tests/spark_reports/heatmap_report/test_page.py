"""The heatmap report's first line: a verdict on the Double-11 talk's 20 ms max."""

from __future__ import annotations

from datetime import UTC, datetime

from spark_reports.heatmap_report.page import heatmap_verdict

T = int(datetime(2026, 11, 11, 0, 0, 5, tzinfo=UTC).timestamp())


def test_fail_names_worst_broker_when_and_how_far_over():
    v = heatmap_verdict("send", {"broker": "broker-002", "t": T, "max": 0.8778}, 5,
                        spike_total=3, spike_brokers=2, brokers=6, calls_over=5179)  # fmt: skip
    assert v["line"] == (
        "FAIL: worst broker-002, send max 877.8 ms at 2026-11-11 00:00:05 UTC (5 s window), "
        "857.8 ms over 20 ms; 3 spike windows on 2 of 6 brokers, 5,179 sends over 20 ms"
    )
    assert (v["pass"], v["broker"], v["at"]) == (False, "broker-002", "2026-11-11T00:00:05+00:00")
    assert (v["max_ms"], v["over_20ms_ms"]) == (877.8, 857.8)


def test_pass_still_names_the_worst_broker_and_the_margin():
    v = heatmap_verdict("send", {"broker": "broker-001", "t": T, "max": 0.0142}, 60,
                        spike_total=0, spike_brokers=0, brokers=6, calls_over=0)  # fmt: skip
    assert v["pass"] is True
    assert v["line"] == (
        "PASS: no send over 20 ms; worst broker-001, max 14.2 ms at 2026-11-11 00:00:05 UTC "
        "(60 s window), 5.80 ms under"
    )


def test_no_rows_is_no_verdict():
    v = heatmap_verdict("pull", None, 60, 0, 0, 0, 0)
    assert v == {"pass": None, "line": "NO DATA: no pull calls to judge", "op": "pull"}
