"""Every SLA alert of the session, raised and cleared, newest first; below, the cluster's
events log: what happened and when, across sessions, as the post-mortem will read it."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widgets import Footer

from console.tui.screens.base import StateScreen
from console.tui.widgets import PanelView, TitleHeader


class AlertsScreen(StateScreen):
    def compose(self):
        yield TitleHeader()
        with VerticalScroll(id="alerts"):
            yield PanelView("alerts", id="alerts-list", title="alerts (this session)")
            yield PanelView("event_log", id="event-log",
                            title="events log (events.jsonl: alerts, fuse, failovers, faults, "
                                  "commands)")
        yield Footer()
