"""Percentile sparklines per second: p50, p99 and max of sends, as wide as
the panel allows (up to the last 60 s), each with its latest value and its top: a
sparkline is scaled to its own largest value, so the top is what its tallest bar reads
(a stall's 700 ms spike drawn beside a latest 2 ms said neither)."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from console.tui.format import ms, sparkline

WIDTH = 60
LABELS = 5 + 1 + 9 + 14  # "p99  ", " 1,234 ms" and "  top 1,234 ms"


class Sparklines:
    def __init__(self, rows: list[tuple[str, list[float | None]]], limit_s: float) -> None:
        self.rows = rows
        self.limit_s = limit_s  # a series whose last value is over it is drawn red

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(4, min(WIDTH, options.max_width - LABELS))
        table = Table(box=None, show_header=False, pad_edge=False)
        table.add_column(style="bold", no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column(justify="right", no_wrap=True)
        table.add_column(justify="right", no_wrap=True)
        for label, values in self.rows:
            values = values[-width:]
            last = next((v for v in reversed(values) if v is not None), None)
            top = max((v for v in values if v is not None), default=None)
            style = "red" if last is not None and last > self.limit_s else "cyan"
            table.add_row(label, Text(sparkline(values, width), style=style), ms(last),
                          Text(f" top {ms(top)}", style="red" if top is not None
                               and top > self.limit_s else "dim"))
        yield table


def render(state, focus=None):
    broker = state.broker(focus) if focus else None
    if broker is None:
        return Text("no broker", style="dim")
    hists = [h for _, h in broker.history[-WIDTH:]]
    return Sparklines([(label, [(h.max if q is None else h.quantile(q)) if h.count else None
                                for h in hists])
                       for label, q in (("p50", 0.5), ("p99", 0.99), ("max", None))],
                      state.sla.max_s)
