"""One consumer group: its figures, lag over the last minutes, every queue."""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer

from console.tui.screens.base import StateScreen
from console.tui.widgets import PanelView, TitleHeader


class ConsumerGroupScreen(StateScreen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back"),
                Binding("left_square_bracket", "step(-1)", "Prev group"),
                Binding("right_square_bracket", "step(1)", "Next group"),
                Binding("o", "offsets", "Offsets")]

    def __init__(self, group: str) -> None:
        super().__init__()
        self.group = group

    def compose(self):
        yield TitleHeader()
        with VerticalScroll(id="consumer-group"):
            yield PanelView("consumer_queues", self.group, id="consumer-queues",
                            title="queues, worst first")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"consumer group {self.group}"
        state = getattr(self.app, "state", None)
        if state is not None:
            self.update_state(state)

    def action_step(self, delta: int) -> None:
        """`[` / `]`: the previous or next group in the list's order (worst first)."""
        state = getattr(self.app, "state", None)
        names = [g.name for g in state.consumers] if state is not None else []
        if not names:
            return
        at = names.index(self.group) if self.group in names else 0
        self.group = names[(at + delta) % len(names)]
        self.query_one(PanelView).focus = self.group
        self.sub_title = f"consumer group {self.group}"
        self.update_state(state)

    def action_offsets(self) -> None:
        from console.tui.screens.group_offsets import open_offsets

        open_offsets(self.app, self.group)
