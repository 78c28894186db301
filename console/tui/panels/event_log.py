"""The cluster's events log (broker_core.observe.events), newest first: every alert edge,
fuse transition, failover, fault and operator command at the time it happened, as
written, across console sessions (the alert strip is this session's only)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from console.tui.format import clock
from console.tui.panels.alerts import SEVERITY_STYLE

LIMIT = 300


def render(state, focus=None):
    events = state.logged
    if not events:
        return Text("no events log: a console started with --cluster FILE (or the demo) "
                    "reads the cluster's events.jsonl", style="dim")
    table = Table(box=None, header_style="bold", pad_edge=False)
    for label in ("time", "kind", "severity", "what"):
        table.add_column(label)
    shown = 0
    # by when each happened: a fuse transition is logged a poll after the fuse made it
    for e in sorted(events, key=lambda e: e["time"], reverse=True):
        if focus and focus not in (e.get("subject") or "") and focus not in e.get("text", ""):
            continue
        style = "dim" if e.get("cleared") else SEVERITY_STYLE.get(e.get("severity"), "")
        table.add_row(clock(e["time"]), e.get("kind", ""), Text(e.get("severity", ""),
                      style=style), Text(str(e.get("text", "")), style=style))
        shown += 1
        if shown >= LIMIT:
            break
    return table
