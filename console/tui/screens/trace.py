"""Message trace: a search box (key or message id) and the timeline; opened from a
broker's screen (`t`) it first lists the slowest traced sends of that broker's spike
second, and Enter on one shows its timeline. Lookups run in worker threads."""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Input, OptionList, Static
from textual.widgets.option_list import Option

from console.data import traces
from console.tui.screens.base import BackOnEscape
from console.tui.widgets import TitleHeader


class TraceScreen(BackOnEscape):
    BINDINGS = [Binding("slash", "focus_search", "Search")]

    def __init__(self, window: tuple[int, int] | None = None, broker: str | None = None,
                 name: str | None = None) -> None:
        super().__init__(name=name)
        self.window, self.broker = window, broker
        self.lines: list[str] = []  # the timeline shown (tests read it)
        self.sample_ids: list[str] = []

    def compose(self):
        yield TitleHeader()
        yield Input(placeholder="key (order-42) or message id, then Enter", id="trace-query")
        yield OptionList(id="trace-samples")
        with VerticalScroll(id="trace-scroll"):
            yield Static("", id="trace-result")
        yield Footer()

    @property
    def cluster(self):
        return getattr(getattr(self.app, "cfg", None), "cluster", None)

    def on_mount(self) -> None:
        self.sub_title = "message trace"
        samples = self.query_one("#trace-samples", OptionList)
        samples.display = self.window is not None
        if self.window is not None:
            begin, end = self.window
            self._show([f"slowest traced sends to {self.broker or 'any broker'} around its "
                        "spike: loading ..."])
            self.run_worker(lambda: self._load_samples(begin, end), thread=True)
        else:
            self.query_one("#trace-query", Input).focus()

    def action_focus_search(self) -> None:
        self.query_one("#trace-query", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.search(event.value)

    def search(self, text: str) -> None:
        self._show([f"searching {text.strip()!r} ..."])
        self.run_worker(lambda: self._found(traces.search(self.cluster, text)), thread=True)

    def _found(self, lines: list[str]) -> None:
        self.app.call_from_thread(self._show, lines)

    def _load_samples(self, begin: int, end: int) -> None:
        try:
            found = traces.samples(self.cluster, self.broker, begin, end)
        except Exception as exc:  # noqa: BLE001 - shown, never fatal to the console
            self.app.call_from_thread(self._show, [f"error: {exc}"])
            return
        self.app.call_from_thread(self._list_samples, found)

    def _list_samples(self, found: list[dict]) -> None:
        from console.trace_format import clock

        samples = self.query_one("#trace-samples", OptionList)
        samples.clear_options()
        self.sample_ids = [r["id"] for r in found]
        for r in found:
            samples.add_option(Option(
                f"{clock(r.get('born_ms'))}  RT {r.get('rt_ms', 0):8.2f} ms  "
                f"{r.get('attempts', 1)} attempt(s)  keys {r.get('keys') or '-'}  {r['id']}",
                id=r["id"]))
        if found:
            self._show([f"{len(found)} traced sends in the window, slowest first: "
                        "Enter on one shows its timeline"])
            samples.highlighted = 0
            samples.focus()
        else:
            self._show(["no traced send in that window (is tracing on? try a search)"])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id:
            self.query_one("#trace-query", Input).value = event.option.id
            self.search(event.option.id)

    def _show(self, lines: list[str]) -> None:
        self.lines = lines
        self.query_one("#trace-result", Static).update("\n".join(lines))
