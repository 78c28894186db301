"""One consumer group (the `focus`) in full: its figures, its lag over the last
minutes, and every queue it commits on, per broker and topic, worst first."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from broker_core.observe.backlog import SEVERITY
from console.data.consumers import trend_arrow
from console.tui.format import GROUP_STYLE, Sparkline, count, duration, rate
from console.tui.panels.consumers import drain_cell, drain_text


def _head(g) -> Text:
    text = Text()
    text.append(f"{g.name}  ", style="bold")
    text.append(g.status, style=GROUP_STYLE.get(g.status, ""))
    text.append(f"  lag {count(g.lag)} {trend_arrow(g)} {rate(g.trend_per_s, signed=True)}  "
                f"in {rate(g.produce_per_s)}  out {rate(g.consume_per_s)}  drain ")
    text.append_text(drain_cell(g))
    on = ", ".join(g.brokers) if len(g.brokers) <= 3 else f"{len(g.brokers)} brokers"
    text.append(f"  idle {duration(g.idle_s)}  on {on}")
    return text


def render(state, focus=None):
    g = state.group(focus) if focus else None
    if g is None:
        return Text(f"no consumer group {focus!r} (any longer)" if focus else "no group",
                    style="dim")
    table = Table(box=None, header_style="bold", pad_edge=False)
    for label, right in (("broker", False), ("topic", False), ("queue", True),
                         ("committed", True), ("end", True), ("lag", True), ("status", False),
                         ("drain", True)):
        table.add_column(label, justify="right" if right else "left", no_wrap=True)
    rows = sorted(g.queues, key=lambda q: (-SEVERITY.get(q.status, 0), -q.lag, q.topic,
                                           q.broker, q.queue))
    for q in rows:
        table.add_row(q.broker, q.topic, str(q.queue), count(q.committed), count(q.end),
                      Text(count(q.lag), style="bold" if q.lag else ""),
                      Text(q.status, style=GROUP_STYLE.get(q.status, "")),
                      drain_text(q.lag, q.drain_s, q.status))
    lags = [float(lag) for _, lag in g.history]
    return Group(_head(g), Text("lag, last minutes (one point per refresh):", style="dim"),
                 Sparkline(lags, style="cyan"), Text(""), table)
