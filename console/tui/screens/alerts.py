"""Every SLA alert of the session, raised and cleared, newest first."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widgets import Footer, Header

from console.tui.screens.base import StateScreen
from console.tui.widgets import PanelView


class AlertsScreen(StateScreen):
    def compose(self):
        yield Header()
        with VerticalScroll(id="alerts"):
            yield PanelView("alerts", id="alerts-list", title="alerts")
        yield Footer()
