"""A Static that draws one registered panel from the latest state."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from console.tui.panels import render_panel


def _height(renderable) -> int | None:
    """How many lines a panel's renderable takes, where that is cheap to know (None:
    unknown, laid out again)."""
    if isinstance(renderable, Text):
        return renderable.plain.count("\n") + 1
    if isinstance(renderable, Table):
        return len(renderable.rows)
    if isinstance(renderable, str):
        return renderable.count("\n") + 1
    return None


class PanelView(Static):
    def __init__(self, panel: str, focus: str | None = None, title: str | None = None,
                 **kwargs) -> None:
        super().__init__("", **kwargs)
        self.panel, self.focus = panel, focus
        self._height: int | None = None
        if title:
            self.border_title = title

    def update_state(self, state) -> None:
        """Drawn again each refresh; laid out again only when its height may have changed
        (a layout pass of the whole screen for each panel each second was most of the
        console's CPU)."""
        renderable = render_panel(self.panel, state, self.focus)
        height = _height(renderable)
        self.update(renderable, layout=height is None or height != self._height)
        self._height = height
