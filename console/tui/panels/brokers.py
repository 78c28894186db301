"""The broker table: one column list shared by the TUI's DataTable and the
Rich table of `floodgate status`; each column gives a sort key and a cell."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text

from broker_core.store.config import DISK_MAX_USED_RATIO
from console.data.alerts import RAFT_ROLES
from console.data.state import STATES, Sla
from console.tui.format import STATE_STYLE, count, ms, pct, rate, size

_RANK = {s: i for i, s in enumerate(STATES)}


@dataclass(frozen=True)
class Column:
    label: str
    key: Callable[[Any], Any]  # sort key (None sorts last)
    cell: Callable[[Any, Sla], Text]  # (broker view, the lines to judge against)
    numeric: bool = True
    width: int | None = None  # fixed in the TUI, so a later, longer value is never cut


def _lat(attr: str) -> Column:  # "1,234 ms" fits in 8
    def cell(b, sla: Sla) -> Text:
        v = getattr(b, attr)
        return Text(ms(v), style="bold red" if v is not None and v > sla.max_s else "",
                    justify="right")

    return Column(attr, lambda b: getattr(b, attr), cell, width=8)


def _plain(label: str, attr: str, fmt: Callable[[Any], str], bad=None, width: int = 7
           ) -> Column:
    def cell(b, sla: Sla) -> Text:
        v = getattr(b, attr)
        return Text(fmt(v), style="red" if bad and v is not None and bad(v, sla) else "",
                    justify="right")

    return Column(label, lambda b: getattr(b, attr), cell, width=width)


COLUMNS: tuple[Column, ...] = (
    Column("broker", lambda b: b.name, lambda b, sla: Text(b.name), numeric=False, width=None),
    Column("state", lambda b: _RANK.get(b.state, 9),
           lambda b, sla: Text(b.state + ("?" if b.failures and b.state != "DOWN" else ""),
                          style=STATE_STYLE.get(b.state, "")), numeric=False, width=9),
    _plain("in", "in_per_s", rate),
    _plain("out", "out_per_s", rate),
    _plain("avg", "mean", ms, lambda v, sla: v > sla.mean_s, width=8),
    _lat("p50"),
    _lat("p99"),
    _lat("p999"),
    _lat("max"),
    _plain(">20ms", "over_20ms", count, lambda v, sla: v > 0, width=6),
    _plain("disk", "disk_used_ratio", pct, lambda v, sla: v > DISK_MAX_USED_RATIO, width=5),
    _plain("flush lag", "flush_lag_bytes", size, lambda v, sla: v > 64 << 20, width=9),
    _plain("cons lag", "consumer_lag", count, width=9),
)


def _role(b) -> str:
    """master e3 (its epoch), or in a raft group leader t7 (its term)."""
    if not b.role:
        return ""
    raft = b.replication == "raft"
    role = RAFT_ROLES.get(b.role, b.role.lower()) if raft else b.role.lower()
    return f"{role} {'t' if raft else 'e'}{b.epoch}" if b.epoch is not None else role


def _role_style(b) -> str:
    if b.role == "MASTER":
        return "bold red" if b.in_sync == 0 and b.replication == "sync" else "bold"
    return "yellow" if b.role == "NONE" else ""


def _lag_cell(b, sla: Sla) -> Text:
    text = "" if b.repl_lag_bytes is None else size(b.repl_lag_bytes)
    if b.repl_lag_s:
        text += f" {b.repl_lag_s * 1000:,.0f}ms"
    late = b.repl_lag_s is not None and b.repl_lag_s > 1.0
    return Text(text, style="red" if late else "", justify="right")


# Replicated clusters only: the group, the role with its epoch, replication lag
# (a master's slowest slave, or a slave's own distance to its master).
HA_COLUMNS: tuple[Column, ...] = (
    Column("group", lambda b: b.group, lambda b, sla: Text(b.group or ""), numeric=False,
           width=9),
    Column("role", lambda b: (b.role or "", b.epoch or 0),
           lambda b, sla: Text(_role(b), style=_role_style(b)), numeric=False, width=10),
    Column("repl lag", lambda b: b.repl_lag_bytes, _lag_cell, width=14),
)


def columns_for(brokers) -> tuple[Column, ...]:
    """The table's columns: with the HA ones after the state when any broker is in a group."""
    if any(getattr(b, "role", None) for b in brokers):
        return COLUMNS[:2] + HA_COLUMNS + COLUMNS[2:]
    return COLUMNS


def sort_brokers(brokers, column: int, reverse: bool = False,
                 columns: tuple[Column, ...] = COLUMNS) -> list:
    col = columns[column]
    present = [b for b in brokers if col.key(b) is not None]
    missing = [b for b in brokers if col.key(b) is None]
    return sorted(present, key=col.key, reverse=reverse) + missing


def matches(broker, needle: str) -> bool:
    needle = needle.lower().strip()
    return not needle or needle in broker.name.lower() or needle in broker.state.lower() \
        or needle in broker.key.lower()


def render(state, focus=None) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.title = "send latency over the last 10 s"
    columns = columns_for(state.brokers)
    for col in columns:
        table.add_column(col.label, justify="right" if col.numeric else "left", no_wrap=True)
    table.add_column("why", style="dim", overflow="fold")
    for b in state.brokers:
        table.add_row(*(col.cell(b, state.sla) for col in columns), b.reason)
    return table


def not_up(brokers) -> list:
    """The brokers that are not UP and say why."""
    return [b for b in brokers if b.state != "UP" and b.reason]


def render_reasons(state, focus=None) -> Text:
    """Why each broker is not UP, one line each: the table's last column, which a terminal
    narrower than the table cuts off (at 170 columns it showed three letters)."""
    text = Text(no_wrap=True, overflow="ellipsis")
    width = max((len(b.name) for b in state.brokers), default=0)
    for b in not_up(state.brokers):
        if text:
            text.append("\n")
        text.append(f"{b.name:<{width}}  ")
        text.append(f"{b.state:<8}", style=STATE_STYLE.get(b.state, ""))
        text.append(f"  {b.reason}")
    return text
