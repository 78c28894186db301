"""Consumer groups (`g`): one row per group (and per instance of a broadcast group),
worst first (Enter opens its queues, `o` its offsets), retries and dead letters
each; below, delayed messages per broker, transactions (half messages pending,
check-backs, rollbacks), orderly groups' queue locks, and flow control: quotas in
force and throttled sends."""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Footer, Static

from console.tui.screens.base import StateScreen
from console.tui.widgets import GroupChosen, GroupTable, PanelView, TitleHeader


class ConsumersScreen(StateScreen):
    BINDINGS = [Binding("o", "offsets", "Offsets")]

    def compose(self):
        yield TitleHeader()
        with Vertical(id="consumers"):
            yield PanelView("consumers_line", id="consumers-line")
            yield GroupTable(id="groups")
            yield Static("[dim]Enter: the group's queues · o: its offsets · ↑↓: move · "
                         "lag: messages not yet consumed · drain: at the net rate · "
                         "retry / dead: kept in %RETRY% / %DLQ%[/dim]",
                         id="groups-hint")
            yield PanelView("delayed", id="delayed", title="delayed messages (retries too)")
            yield PanelView("transactions", id="transactions",
                            title="transactional messages (half messages)")
            yield PanelView("queue_locks", id="queue-locks",
                            title="ordered queues: who holds which (locks)")
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

    def action_offsets(self) -> None:
        name = self.query_one(GroupTable).cursor_group
        if name is not None:
            from console.tui.screens.group_offsets import open_offsets

            open_offsets(self.app, name)
