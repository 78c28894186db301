"""The producers' fuses: isolated brokers, overflow, cap, transitions."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widgets import Footer

from console.tui.screens.base import StateScreen
from console.tui.widgets import PanelView, TitleHeader


class FuseScreen(StateScreen):
    def compose(self):
        yield TitleHeader()
        with VerticalScroll(id="fuse"):
            yield PanelView("fuse_status", id="fuse-status", title="fuse")
            yield PanelView("fuse_timeline", id="fuse-timeline", title="transitions")
        yield Footer()
