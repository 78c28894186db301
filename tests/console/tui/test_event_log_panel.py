"""The alerts screen's events log: newest first by when each thing happened, whatever
order the writers logged them in."""

from __future__ import annotations

from console.data.state import ClusterState
from console.tui.format import clock
from console.tui.panels.event_log import render


def _rows(table) -> list[str]:
    return [cell.plain if hasattr(cell, "plain") else str(cell)
            for cell in table.columns[0]._cells]


def test_events_show_newest_first_by_their_time_not_the_order_written():
    logged = ({"time": 100.0, "kind": "fault", "severity": "warning", "text": "stall"},
              {"time": 102.0, "kind": "alert", "severity": "critical", "text": "max"},
              # the fuse's isolation at 100.3, logged a poll later by the console
              {"time": 100.3, "kind": "fuse", "severity": "warning", "text": "isolate"})
    table = render(ClusterState(now=103.0, logged=logged))
    assert _rows(table) == [clock(102.0), clock(100.3), clock(100.0)]


def test_without_a_log_it_says_where_one_comes_from():
    text = render(ClusterState(now=1.0))
    assert "--cluster FILE" in text.plain
