"""The cluster: summary line, broker table (sort, `/` filter, Enter opens a broker)."""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Footer, Input, Static

from console.tui.panels.brokers import not_up
from console.tui.screens.base import StateScreen
from console.tui.widgets import BrokerChosen, BrokerTable, PanelView, TitleHeader


class ClusterScreen(StateScreen):
    BINDINGS = [
        Binding("slash", "filter", "Filter"),
        Binding("s", "sort_next", "Sort"),
        Binding("r", "sort_reverse", "Reverse"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    def compose(self):
        yield TitleHeader()
        with Vertical(id="cluster"):
            yield PanelView("summary", id="summary")
            yield BrokerTable(id="brokers")
            yield PanelView("broker_reasons", id="broker-reasons")
            yield Static("", id="view-line")
            yield Input(placeholder="filter: name, state or address (Enter to keep, Esc to clear)",
                        id="filter")
            yield PanelView("recent_alerts", id="cluster-alerts", title="alerts (a: all)")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        self.query_one(BrokerTable).focus()
        self._describe_view()

    @property
    def table(self) -> BrokerTable:
        return self.query_one(BrokerTable)

    def update_state(self, state) -> None:
        super().update_state(state)
        self.table.update_state(state)
        # the lines under the table take room only while some broker is not UP
        self.query_one("#broker-reasons").display = bool(not_up(state.brokers))

    def _describe_view(self) -> None:
        t = self.table
        sort = "cluster order" if t.sort_column is None else \
            f"sorted by {t.columns[t.sort_column].label} {'▼' if t.sort_reverse else '▲'}"
        filt = f" · filter {t.filter_text!r}" if t.filter_text else ""
        self.query_one("#view-line", Static).update(
            f"[dim]{sort}{filt} · Enter: broker heatmap · s/r: sort · /: filter[/dim]")

    def action_sort_next(self) -> None:
        t = self.table
        nxt = 0 if t.sort_column is None else (t.sort_column + 1) % len(t.columns)
        t.set_view(nxt, False)
        self._describe_view()

    def action_sort_reverse(self) -> None:
        t = self.table
        t.set_view(t.sort_column if t.sort_column is not None else 0, not t.sort_reverse)
        self._describe_view()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.value = self.table.filter_text
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.display = False
        self.table.set_view(filter_text="")
        self.table.focus()
        self._describe_view()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.table.set_view(filter_text=event.value)
        self._describe_view()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.input.display = False
        self.table.focus()

    def on_broker_chosen(self, message: BrokerChosen) -> None:
        from console.tui.screens.broker import BrokerScreen

        self.app.push_screen(BrokerScreen(message.key))
