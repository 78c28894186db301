"""The fuse's transitions, newest first: isolate, release, overflow, reexclude."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from console.tui.format import clock

EVENT_STYLE = {"isolate": "magenta", "release": "green", "overflow": "yellow",
               "reexclude": "magenta"}
LINES = 30


def transitions(state) -> list[dict]:
    rows = []
    for p in state.producers:
        for t in (p.fuse or {}).get("transitions") or []:
            if isinstance(t, dict):
                rows.append({**t, "producer": p.name})
    return sorted(rows, key=lambda t: t.get("wall_time") or t.get("time") or 0.0)


def render(state, focus=None):
    rows = transitions(state)
    if not rows:
        return Text("no fuse transition yet", style="dim")
    table = Table(box=None, header_style="bold", pad_edge=False)
    for label in ("time", "producer", "broker", "event", "reason"):
        table.add_column(label)
    for t in reversed(rows[-LINES:]):
        event = str(t.get("event"))
        table.add_row(clock(t.get("wall_time")), str(t["producer"]), str(t.get("broker")),
                      Text(event, style=EVENT_STYLE.get(event, "")),
                      str(t.get("reason")) + (f": {t['detail']}" if t.get("detail") else ""))
    return table
