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


def _brokers(names: list[str], every: int) -> str:
    if len(names) == every > 1:
        return f"all {every}"
    return ", ".join(names) if len(names) <= 3 else f"{len(names)} brokers"


def _quota_table(flow, brokers: int) -> Table:
    """One row per quota, with the brokers that enforce it: `quota apply` sets the same
    quota on every broker, and six identical rows would hide a broker that lacks it."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for label, right in (("kind", False), ("target", False), ("rate", True), ("burst", True),
                         ("warm-up", True), ("on", False), ("warming", False)):
        table.add_column(label, justify="right" if right else "left", no_wrap=True)
    same: dict[tuple, list] = {}
    for q in flow.quotas:
        same.setdefault((q.kind, q.target, q.rate, q.burst, q.warmup_s), []).append(q)
    for (kind, target, per_s, burst, warmup_s), rows in sorted(
            same.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or 0.0)):
        warming = ", ".join(f"{q.broker}: {name} {rate(r)}" for q in rows for name, r in q.rate_now)
        table.add_row(kind, target, rate(per_s), "-" if burst is None else f"{burst:,.0f}",
                      duration(warmup_s) if warmup_s else "-",
                      _brokers(sorted(q.broker for q in rows), brokers),
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
        brokers = sum(1 for b in state.brokers if b.state != "DOWN" and b.stats is not None)
        parts += [Text("quotas in force", style="bold underline"), _quota_table(flow, brokers)]
    if flow.throttled:
        parts += [Text("sends throttled (answered FLOW_CONTROL), per broker", style="bold "
                       "underline"), _throttled_table(flow)]
    parts += [_producer_line(p) for p in state.producers if p.sends.get("flow_control")]
    return Group(*parts)


def _producer_line(producer) -> Text:
    """What a watched producer saw of flow control: its attempts refused, its sends
    that ran out of backoffs, the time it waited."""
    s = producer.sends
    return Text(f"producer {producer.name}: {count(int(s['flow_control']))} attempts throttled, "
                f"{count(int(s.get('flow_control_gave_up', 0)))} sends gave up, "
                f"{duration(s.get('backoff_s', 0.0))} backed off")
