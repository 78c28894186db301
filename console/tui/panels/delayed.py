"""Delayed messages per broker (server.delay_service): pending per level, in all,
and how late the oldest due one is. The groups screen shows it under the groups
(a retry is a delayed message: a growing pending count is retries piling up), and
`floodgate status` prints it. A slave's rows are its master's copy (the schedule queues
and their delivery offsets, a second old: a few more pending than its master's, none
overdue, as only a master delivers) and are shown only while that master does not answer."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from console.data.replicas import copied
from console.tui.format import count

LEVELS_SHOWN = 4  # the fullest levels named in a row; the rest summed


def _levels(pending: dict) -> str:
    fullest = sorted(pending.items(), key=lambda kv: -kv[1])
    out = ", ".join(f"{level} {count(n)}" for level, n in fullest[:LEVELS_SHOWN])
    if len(fullest) > LEVELS_SHOWN:
        out += f", {len(fullest) - LEVELS_SHOWN} more levels"
    return out


def render(state, focus=None) -> Table | Text:
    rows = []
    copies = copied(state.brokers)
    for b in state.brokers:
        if b.name in copies:
            continue
        d = (b.stats.delayed if b.stats is not None else None) or {}
        if d.get("pending_total") or d.get("overdue_s"):
            rows.append((b.name, d))
    if not rows:
        return Text("no delayed messages pending", style="dim")
    table = Table(box=None, header_style="bold", pad_edge=False)
    for label, right in (("broker", False), ("pending", True), ("oldest overdue", True),
                         ("by level (fullest first)", False)):
        table.add_column(label, justify="right" if right else "left", no_wrap=True)
    for name, d in rows:
        overdue = d.get("overdue_s") or 0.0
        table.add_row(name, count(d.get("pending_total") or 0),
                      Text(f"{overdue:.1f} s" if overdue else "-",
                           style="red" if overdue >= 1.0 else ""),
                      _levels(d.get("pending") or {}))
    return table
