"""`floodgate incident export`: the post-mortem page from a data dir's events log and
metrics log, every event at its real time, the failover's kill-to-promotion, the
broker that stalled; HTML drawn in headless Chromium, Markdown for a ticket."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from broker_core.observe.events import EventLog
from broker_core.observe.metrics_log import MetricsLogWriter
from console.cli import main
from console.incident.page import clock
from heatmap import LatencyHistogram
from heatmap.metrics_log import latency_row
from tests.spark_reports import browser
from tests.spark_reports.browser import CHROMIUM

T = 1_794_380_400  # a whole minute of November 2026


def _metrics(data: Path) -> None:
    """90 s of sends on two masters; group-2-a stalls 300 ms in seconds 10-11."""
    for broker in ("group-1-a", "group-2-a"):
        rows = []
        for s in range(90):
            h = LatencyHistogram()
            h.record_many([0.0008] * 98 + [0.002, 0.0035])
            if broker == "group-2-a" and s in (10, 11):
                h.record(0.3)
            rows.append(latency_row(T + s, "demo", broker, "send", h, h.count, 128 * h.count))
        MetricsLogWriter(data / "metrics", "demo", broker).roll((rows, [], []))


def _events(data: Path) -> None:
    log = EventLog(data, "demo")
    log.append("note", "demo started: 4 groups, 5000 msgs/s", at=T)
    log.append("fault", "stall_ms=300 on master group-2-a", at=T + 10, subject="group-2",
               severity="warning", action="stall", node="group-2-a")
    console = EventLog(data, "console")
    console.append("fuse", "fuse of demo: isolate group-2 (slow)", at=T + 10.31,
                   subject="group-2", severity="warning", event="isolate", reason="slow",
                   producer="demo")
    console.append("alert", "group-2-a send max 300.0 ms > 20.0 ms (10 s)", at=T + 11,
                   subject="max:group-2-a", severity="critical")
    log.append("fault", "SIGKILL master group-1-a (pid 4242)", at=T + 60, subject="group-1",
               severity="warning", action="kill", node="group-1-a")
    EventLog(data, "controller").append(
        "failover", "group-1 failed over: group-1-b master at epoch 2 (was group-1-a)",
        at=T + 60.25, subject="group-1", severity="warning", old_master="group-1-a",
        new_master="group-1-b", epoch=2)


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "demo-data"
    d.mkdir()
    _metrics(d)
    _events(d)
    return d


def export(capsys, data: Path, *extra: str) -> tuple[int, str, str]:
    code = main(["incident", "export", "--data", str(data), "--out", str(data / "pm.html"),
                 "--markdown", str(data / "pm.md"), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_page_holds_every_event_at_its_time_and_what_the_logs_measured(data, capsys):
    code, out, _ = export(capsys, data)
    assert code == 0 and "6 events, 2 brokers' sends" in out
    page = (data / "pm.html").read_text()
    text = re.sub(r"<[^>]+>", " ", page)
    for at, what in ((T + 10, "stall_ms=300 on master group-2-a"),
                     (T + 10.31, "fuse of demo: isolate group-2 (slow)"),
                     (T + 60, "SIGKILL master group-1-a"),
                     (T + 60.25, "group-1 failed over: group-1-b master")):
        assert re.search(rf"{clock(at)}\s+\w+\s+\w+\s+{re.escape(what)}", text), what
    assert "kill to promotion" in text and "0.25 s" in text  # the failover's unavailability
    assert "The fuse isolated group-2 0.31 s after the first fault" in text
    # group-2-a's stall: its max and the window it fell in; group-1-a stayed well under
    assert re.search(r"group-2-a\s+9,002\s+[\d,]+\s+\S+ ms\s+300\.\d ms\s+1\b", text)
    assert re.search(r"group-1-a\s+9,000\s+[\d,]+\s+\S+ ms\s+3\.\d ms\s+0\b", text)
    for section in ("Summary", "Impact", "Root causes", "Trigger and detection", "Resolution",
                    "Action items", "Lessons learned", "Timeline", "Supporting information"):
        assert f"<h2>{section}</h2>" in page
    assert "not measured (no drill ran" in text  # lost/duplicated: not invented
    assert page.count("data:image/png;base64,") == 2  # the heatmap and the p99 lines
    assert not re.search(r'(src|href)="(https?:|//)', page)  # self-contained


def test_a_drills_measured_loss_is_quoted_in_the_impact(data, capsys):
    EventLog(data, "command").append(
        "drill", "floodgate drill failover --cluster c: done (lost 0, duplicated 3)",
        at=T + 70, lost=0, duplicated=3, failover_s=0.41)
    export(capsys, data)
    md = (data / "pm.md").read_text()
    assert (f"Lost and duplicated messages, as drills measured them: {clock(T + 70)} lost 0, "
            "duplicated 3, failover 0.41 s.") in md


def test_markdown_says_what_the_page_says_for_a_ticket(data, capsys):
    export(capsys, data)
    md = (data / "pm.md").read_text()
    assert md.startswith("# Post-mortem: demo-data")
    assert f"| {clock(T + 60.25)} | failover | warning | group-1 failed over" in md
    assert "| action | type | owner | issue |" in md and "_What went wrong?_" in md


def test_a_window_keeps_only_its_events_and_seconds(data, capsys):
    code, out, _ = export(capsys, data, "--from", str(T + 50), "--to", str(T + 89), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["events"] == 2 and doc["from"] == T + 50
    text = (data / "pm.html").read_text()
    assert "stall_ms=300" not in text and "SIGKILL master group-1-a" in text
    assert not re.search(r"group-2-a\s+\S+\s+\S+ ms\s+300", re.sub(r"<[^>]+>", " ", text))


@pytest.mark.parametrize("argv, code, words", [
    (["--from", "25:99"], 2, "--from must be HH:MM[:SS]"),
    (["--from", str(T + 80), "--to", str(T + 20)], 2, "--from must be before --to"),
])
def test_bad_times_are_usage_errors_in_one_line(data, capsys, argv, code, words):
    got, _, err = export(capsys, data, *argv)
    assert got == code and words in err and err.count("\n") == 1
    assert not (data / "pm.html").exists()


def test_a_dir_without_logs_is_refused_by_name(tmp_path, capsys):
    code = main(["incident", "export", "--data", str(tmp_path), "--out", str(tmp_path / "x")])
    _, err = capsys.readouterr()
    assert code == 1 and "no events.jsonl and no metrics log here" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium: run scripts/setup.sh")
def test_headless_chromium_shows_the_page_whole_and_offline(data, capsys):
    export(capsys, data)

    async def check(p):
        ready = await p.wait_for("[...document.images].every(i => i.complete && "
                                 "i.naturalWidth > 400)")
        rows = await p.eval("document.querySelectorAll('tr').length")
        return ready, rows, p.errors(), p.requests()

    ready, rows, errors, requests = browser.run(data / "pm.html", check)
    assert ready and rows > 10 and errors == []
    assert {u.split(":", 1)[0] for u in requests} <= {"file", "data"}
