"""One broker: the send-latency heatmap of the last 5 minutes, percentile
sparklines, throughput, disk and flush, its topics and hottest queues, recent
events."""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer

from console.tui.screens.base import StateScreen
from console.tui.widgets import PanelView, TitleHeader


class BrokerScreen(StateScreen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back"),
                Binding("left_square_bracket", "step(-1)", "Prev broker"),
                Binding("right_square_bracket", "step(1)", "Next broker"),
                Binding("t", "spike_traces", "Traces in spike")]

    # a short terminal (80x24) keeps the heatmap, p50/p99/max and events, full width
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key

    def compose(self):
        yield TitleHeader()
        with Vertical(id="broker"):  # sized to the terminal: the heatmap fits its share
            yield PanelView("heatmap", self.key, id="heatmap", title="send latency heatmap")
            with Horizontal(id="broker-row"):
                yield PanelView("percentiles", self.key, id="percentiles",
                                title="send p50 / p99 / max, last 60 s")
                yield PanelView("throughput", self.key, id="throughput", title="throughput")
            with Horizontal(id="broker-row2"):
                yield PanelView("disk", self.key, id="disk", title="disk and flush")
                yield PanelView("queues", self.key, id="queues",
                                title="topics and the hottest queues")
                yield PanelView("events", self.key, id="events", title="events")
        yield Footer()

    def on_mount(self) -> None:
        state = getattr(self.app, "state", None)
        broker = state.broker(self.key) if state else None
        self.sub_title = broker.name if broker else self.key
        if state is not None:
            self.update_state(state)

    def action_step(self, delta: int) -> None:
        """`[` / `]`: the previous or next broker in the cluster's order."""
        state = getattr(self.app, "state", None)
        if state is None or not state.brokers:
            return
        keys = [b.key for b in state.brokers]
        at = keys.index(self.key) if self.key in keys else 0
        self.key = keys[(at + delta) % len(keys)]
        for view in self.query(PanelView):
            view.focus = self.key
        self.sub_title = state.broker(self.key).name
        self.update_state(state)

    def action_spike_traces(self) -> None:
        """`t`: the slowest traced sends of this broker's worst second (its spike)."""
        from console.data.traces import spike_window
        from console.tui.screens.trace import TraceScreen

        state = getattr(self.app, "state", None)
        broker = state.broker(self.key) if state else None
        window = spike_window(broker) if broker is not None else None
        if window is None:
            self.notify("no send latency history for this broker yet", severity="warning")
            return
        name = broker.group or broker.name  # a producer knows a replicated broker by group
        self.app.push_screen(TraceScreen(window, name))
