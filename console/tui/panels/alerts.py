"""SLA alerts as they happen: raised and cleared, newest first."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from console.tui.format import clock

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def render(state, focus=None, limit: int = 200):
    log = state.alerts
    if not log.entries:
        return Text("no SLA breach this session", style="green")
    table = Table(box=None, header_style="bold", pad_edge=False)
    for label in ("time", "severity", "alert"):
        table.add_column(label)
    active = {a.key for a in log.active}
    for a in reversed(log.entries[-limit:]):
        if focus and focus not in a.key:
            continue
        style = "dim" if a.cleared else SEVERITY_STYLE.get(a.severity, "")
        live = "●" if a.key in active and not a.cleared else " "
        table.add_row(clock(a.time), Text(f"{live} {a.severity}", style=style),
                      Text(a.text, style=style))
    return table


def render_recent(state, focus=None):
    """The cluster screen's strip: the last few only (a full table each second is waste)."""
    return render(state, focus, limit=6)
