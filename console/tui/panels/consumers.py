"""Consumer groups, one row each (console.data.consumers): status, lag and
its trend, write and consume rates, time to drain, idle. One column list for
the TUI's group table and the Rich table of `floodgate status`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.table import Table
from rich.text import Text

from console.data.consumers import GroupView, counts, lag_growing, trend_arrow
from console.tui.format import GROUP_STYLE, clock, count, duration, rate, sparkline

TREND_WIDTH = 16  # polls of lag history in the trend cell
ARROW_STYLE = {"↑": "red", "↓": "green", "→": "dim"}


@dataclass(frozen=True)
class Column:
    label: str
    cell: Callable[[GroupView], Text]
    numeric: bool = True


def _trend(g: GroupView) -> Text:
    arrow = trend_arrow(g)
    text = Text(f"{arrow} ", style=ARROW_STYLE[arrow])
    text.append(sparkline([float(lag) for _, lag in g.history], TREND_WIDTH).ljust(TREND_WIDTH),
                style="cyan")
    return text


def drain_text(lag: int, drain_s: float | None, status: str, growing: bool = False) -> Text:
    """The time to drain; with lag and no net progress, "keeping up" (judged OK: a steady
    lag, consumed as fast as written), "lag growing" (judged OK, but the lag rises: an
    offset reset, or a fall behind not yet a trend) or "never" (it is falling behind)."""
    if lag and drain_s is None:
        if status != "OK":
            return Text("never", style="red")
        return Text("lag growing", style="yellow") if growing else Text("keeping up", style="dim")
    return Text(duration(drain_s))


def drain_cell(g: GroupView) -> Text:
    return drain_text(g.lag, g.drain_s, g.status, lag_growing(g))


COLUMNS: tuple[Column, ...] = (
    Column("group", lambda g: Text(g.name) + (Text(" broadcast", style="dim") if g.instance_of
                                               else Text())
           + (Text(" exactly once", style="green") if g.exactly_once else Text()),
           numeric=False),
    Column("status", lambda g: Text(g.status, style=GROUP_STYLE.get(g.status, "")),
           numeric=False),
    Column("lag", lambda g: Text(count(g.lag), style="bold" if g.lag else "")),
    Column("trend", _trend, numeric=False),
    Column("in", lambda g: Text(rate(g.produce_per_s))),
    Column("out", lambda g: Text(rate(g.consume_per_s))),
    Column("drain", drain_cell),
    Column("idle", lambda g: Text(duration(g.idle_s),
                                  style="red" if g.status == "STOPPED" else "")),
    Column("retry", lambda g: Text(count(g.retries) + (" ↑" if g.retries_per_s else ""),
                                   style="yellow" if g.retries_per_s else "")),
    Column("dead", lambda g: Text(count(g.dead_letters) + (" ↑" if g.dead_per_s else ""),
                                  style="red" if g.dead_per_s else "")),
    Column("brokers", lambda g: Text(str(len(g.brokers)))),
    Column("topics", lambda g: Text(", ".join(g.topics), style="dim"), numeric=False),
)


def describe(groups) -> Text:
    """`3 groups: 1 STALLED 2 OK`, coloured; empty when there are none."""
    text = Text()
    if not groups:
        return text
    by = counts(groups)
    text.append(f"{len(groups)} consumer group{'s' if len(groups) != 1 else ''}: ")
    for status in ("STOPPED", "STALLED", "WARNING", "OK"):
        if by.get(status):
            text.append(f"{by[status]} {status} ", style=GROUP_STYLE[status])
    text.rstrip()
    return text


def render(state, focus=None) -> Table | Text:
    if not state.consumers:
        return Text("no consumer group has committed an offset yet", style="dim")
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.title = "consumer groups (lag: messages not yet consumed)"
    for col in COLUMNS:
        table.add_column(col.label, justify="right" if col.numeric else "left", no_wrap=True)
    for g in state.consumers:
        table.add_row(*(col.cell(g) for col in COLUMNS))
    return table


def _throttled(flow) -> Text:
    if not flow.rate_known:
        return Text(f"{count(flow.total)} in all")
    return Text(rate(flow.per_s), style="yellow" if flow.per_s else "")


def render_line(state, focus=None) -> Text:
    """The consumers screen's header: groups by status, total lag, throttling now."""
    text = Text()
    text.append(f"{clock(state.now)}  ", style="dim")
    if state.consumers:
        text.append_text(describe(state.consumers))
        text.append(f" │ lag {count(sum(g.lag for g in state.consumers))}")
    else:
        text.append("no consumer group yet", style="dim")
    flow = state.flow
    if flow.active:
        targets = len({(q.kind, q.target) for q in flow.quotas})
        text.append(f" │ quotas {targets} │ throttled ")
        text.append_text(_throttled(flow))
    return text


def cluster_line(state) -> Text | None:
    """The cluster header's third line, when there are groups or quotas to speak of."""
    flow = state.flow
    if not state.consumers and not flow.active:
        return None
    text = Text()
    if state.consumers:
        text.append_text(describe(state.consumers))
        text.append(f", lag {count(sum(g.lag for g in state.consumers))}")
    if flow.active:
        text.append(" │ " if state.consumers else "")
        text.append("flow control: throttled ")
        text.append_text(_throttled(flow))
    return text
