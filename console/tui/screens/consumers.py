"""Consumer groups (`g`): one row per group, worst first (Enter opens its
queues), and flow control below: quotas in force and throttled sends."""

from __future__ import annotations

from textual.containers import Vertical
from textual.widgets import Footer, Header, Static

from console.tui.screens.base import StateScreen
from console.tui.widgets import GroupChosen, GroupTable, PanelView


class ConsumersScreen(StateScreen):
    def compose(self):
        yield Header()
        with Vertical(id="consumers"):
            yield PanelView("consumers_line", id="consumers-line")
            yield GroupTable(id="groups")
            yield Static("[dim]Enter: the group's queues · ↑↓: move · "
                         "lag: messages not yet consumed · drain: at the net rate[/dim]",
                         id="groups-hint")
            yield PanelView("throttling", id="throttling", title="flow control (限流)")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(GroupTable).focus()

    def update_state(self, state) -> None:
        super().update_state(state)
        self.query_one(GroupTable).update_state(state)

    def on_group_chosen(self, message: GroupChosen) -> None:
        from console.tui.screens.consumer_group import ConsumerGroupScreen

        self.app.push_screen(ConsumerGroupScreen(message.group))
