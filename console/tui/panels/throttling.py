"""Flow control (console.data.flow_control): the quotas each broker enforces,
and the sends it refused per topic and producer group, as a rate over the
last refresh and a total since the broker started."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from console.tui.format import count, duration, rate


def summary(flow) -> Text:
    """One line: quotas in force and refusals (`floodgate status`, the panel's head)."""
    brokers = len({q.broker for q in flow.quotas})
    targets = len({(q.kind, q.target) for q in flow.quotas})
    text = Text(f"flow control: {targets} quota{'s' if targets != 1 else ''} on "
                f"{brokers} broker{'s' if brokers != 1 else ''}; throttled ")
    # a first poll (and `floodgate status`) has no earlier count to take a rate from
    if flow.rate_known:
        text.append(f"{rate(flow.per_s)}", style="yellow" if flow.per_s else "")
        text.append(" now, ")
    text.append(f"{count(flow.total)} since the brokers started")
    return text


def _quota_table(flow) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for label, right in (("broker", False), ("kind", False), ("target", False),
                         ("rate", True), ("burst", True), ("warm-up", True),
                         ("warming", False)):
        table.add_column(label, justify="right" if right else "left", no_wrap=True)
    for q in sorted(flow.quotas, key=lambda q: (q.kind, q.target, q.broker)):
        warming = ", ".join(f"{name} {rate(r)}" for name, r in q.rate_now)
        table.add_row(q.broker, q.kind, q.target, rate(q.rate),
                      "-" if q.burst is None else f"{q.burst:,.0f}",
                      duration(q.warmup_s) if q.warmup_s else "-",
                      Text(warming, style="yellow"))
    return table


def _throttled_table(flow) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for label, right in (("broker", False), ("topic", False), ("group", False),
                         ("now", True), ("total", True)):
        table.add_column(label, justify="right" if right else "left", no_wrap=True)
    rows = sorted(flow.throttled, key=lambda t: (-(t.per_s or 0.0), -t.total, t.broker))
    for t in rows:
        table.add_row(t.broker, t.topic, t.group,
                      Text(rate(t.per_s), style="yellow" if t.per_s else ""), count(t.total))
    return table


def render(state, focus=None):
    flow = state.flow
    if not flow.active:
        return Text("no quota in force and no send throttled "
                    "(`floodgate quota set` to add one)", style="dim")
    parts = [summary(flow)]
    # headings as lines of their own: a table's title wraps to the table's width
    if flow.quotas:
        parts += [Text("quotas in force", style="bold underline"), _quota_table(flow)]
    if flow.throttled:
        parts += [Text("sends throttled (answered FLOW_CONTROL), per broker", style="bold "
                       "underline"), _throttled_table(flow)]
    return Group(*parts)
