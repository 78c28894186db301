"""A Static that draws one registered panel from the latest state."""

from __future__ import annotations

from textual.widgets import Static

from console.tui.panels import render_panel


class PanelView(Static):
    def __init__(self, panel: str, focus: str | None = None, title: str | None = None,
                 **kwargs) -> None:
        super().__init__("", **kwargs)
        self.panel, self.focus = panel, focus
        if title:
            self.border_title = title

    def update_state(self, state) -> None:
        self.update(render_panel(self.panel, state, self.focus))
