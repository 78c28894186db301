"""This host: kernel tuning compliance and psutil figures."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widgets import Footer

from console.tui.screens.base import StateScreen
from console.tui.widgets import PanelView, TitleHeader


class HostScreen(StateScreen):
    def compose(self):
        yield TitleHeader()
        with VerticalScroll(id="host"):
            yield PanelView("host_figures", id="host-figures", title="host")
            yield PanelView("host_tuning", id="host-tuning", title="kernel tuning")
        yield Footer()
