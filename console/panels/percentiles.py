"""Percentile sparklines per second: p50, p99 and max of sends."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from console.format import ms, sparkline
from console.panels.heatmap import series

WIDTH = 60


def render(state, focus=None):
    broker = state.broker(focus) if focus else None
    if broker is None:
        return Text("no broker", style="dim")
    pairs = series(broker.history[-WIDTH:])
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_column(justify="right")
    for label, q in (("p50", 0.5), ("p99", 0.99), ("max", None)):
        values = [(h.max if q is None else h.quantile(q)) if h.count else None for _, h in pairs]
        last = next((v for v in reversed(values) if v is not None), None)
        style = "red" if last is not None and last > 0.020 else "cyan"
        table.add_row(label, Text(sparkline(values, WIDTH), style=style), ms(last))
    return table
