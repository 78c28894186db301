"""A consumer group's offsets (`o` from the groups screens): asked of the brokers'
admin API off the UI thread, on opening and every few seconds."""

from __future__ import annotations

import time

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from console.data import offsets
from console.tui.panels import group_offsets
from console.tui.screens.base import BackOnEscape
from console.tui.widgets import TitleHeader

REFRESH_S = 3.0


class GroupOffsetsScreen(BackOnEscape):
    BINDINGS = [Binding("r", "refresh", "Refresh")]

    def __init__(self, group: str) -> None:
        super().__init__()
        self.group = group
        self.view: offsets.OffsetsView | None = None

    def compose(self):
        yield TitleHeader()
        with VerticalScroll(id="group-offsets"):
            yield Static(group_offsets.render(None, time.time()), id="offsets-table")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"offsets of {self.group}"
        self.action_refresh()
        self.set_interval(REFRESH_S, self.action_refresh)

    def action_refresh(self) -> None:
        brokers = list(getattr(getattr(self.app, "cfg", None), "brokers", []) or [])
        self.run_worker(lambda: self._fetched(offsets.fetch(brokers, self.group)),
                        thread=True, exclusive=True, group="offsets")

    def _fetched(self, view: offsets.OffsetsView) -> None:
        self.app.call_from_thread(self.show, view)

    def show(self, view: offsets.OffsetsView) -> None:
        self.view = view
        self.query_one("#offsets-table", Static).update(group_offsets.render(view, time.time()))


def open_offsets(app, name: str) -> None:
    """The offsets screen of group `name` (a broadcast instance's row: its group's)."""
    state = getattr(app, "state", None)
    view = state.group(name) if state is not None else None
    app.push_screen(GroupOffsetsScreen(view.group if view is not None else name))
