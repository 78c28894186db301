"""The broker screen's panels from a broker's /stats: its injected fault in the words
`floodgate fault show` uses (it printed `remaining_s=110.10463051700208`), and its send
errors with the broker's own failures told from refused input, the latest failure and
every code since start."""

from __future__ import annotations

from rich.console import Console

from broker_core.observe.stats_doc import BrokerStats
from console.data.state import BrokerSample, build_state
from console.tui.panels import render_panel


def shown(panel: str, doc: dict) -> str:
    state = build_state([BrokerSample("h1", doc["broker"], BrokerStats.from_dict(doc))], now=1)
    console = Console(width=120, record=True)
    console.print(render_panel(panel, state, doc["broker"]))
    return console.export_text()


def test_the_injected_fault_is_said_in_words():
    fault = {"active": True, "stall_ms": 0, "stall_every_s": 0.0, "stall_random": False,
             "latency_ms": 0, "error_rate": 0.5, "pause_s": 0.0, "duration_s": 120.0,
             "since_s": 9.9, "remaining_s": 110.10463051700208}
    out = shown("events", {"broker": "broker-1", "time": 1.0, "faults": fault})
    assert "fault active for 9.9 s: errors 50 %, clears after 2 min (1 min 50 s left)" in out
    assert "remaining_s" not in out, out


def test_send_errors_tell_failures_from_refusals_with_the_latest_failure_and_codes():
    send10 = {"count": 40, "errors": 12, "failures": 9}
    out = shown("throughput", {
        "broker": "broker-1", "time": 1.0, "ops": {"send": {"10s": send10}},
        "send_error_codes": {"SYSTEM_BUSY": 30, "MESSAGE_TOO_LARGE": 3},
        "last_send_failure": {"code": "SYSTEM_BUSY", "text": "write path busy", "time": 0.5},
        "last_send_refusal": {"code": "MESSAGE_TOO_LARGE", "text": "body too big", "time": 0.4}})
    assert "send errors (10 s) 12: failed 9, refused 3; latest failure SYSTEM_BUSY: write " \
           "path busy; latest refused MESSAGE_TOO_LARGE: body too big" in " ".join(out.split()), out
    assert "since start: SYSTEM_BUSY 30, MESSAGE_TOO_LARGE 3" in out, out
    quiet = shown("throughput", {"broker": "broker-1", "time": 1.0})
    assert "send errors (10 s) 0" in quiet and "failed" not in quiet and "since" not in quiet


def test_each_sparkline_says_its_top_as_well_as_its_latest_value():
    """A sparkline is scaled to its own largest value: its line says that top (red when over
    the line) beside the latest, or a stall's spike reads as the latest 2 ms."""
    from console.tui.panels.percentiles import Sparklines

    console = Console(width=120, record=True)
    console.print(Sparklines([("max", [0.001, 0.71, None, 0.0024]), ("p50", [None, None])],
                             limit_s=0.020))
    lines = console.export_text().splitlines()
    assert lines[0].split()[-5:] == ["2.40", "ms", "top", "710", "ms"]
    assert lines[1].split()[-2:] == ["top", "-"]
