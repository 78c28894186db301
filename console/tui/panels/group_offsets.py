"""A consumer group's offsets table (the groups screen's `o`, console.data.offsets):
per queue its committed offset, end, lag and how old the message at the committed
offset is; for a broadcast group, the same per instance."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from console.tui.format import count, duration

MAX_ROWS = 200  # a group may own 10,000 queues: the worst ones


def _age(now_s: float, ms: int | None) -> str:
    return "-" if ms is None else duration(max(0.0, now_s - ms / 1000)) + " ago"


def render(view, now_s: float):
    if view is None:
        return Text("loading offsets ...", style="dim")
    parts = []
    head = Text(f"{view.group}  ", style="bold")
    head.append(f"lag {count(view.lag)} over {len(view.queues) + len(view.instances)} "
                "queue(s)")
    parts.append(head)
    if view.instances:
        parts.append(Text("broadcast: each instance keeps its own offsets", style="dim"))
    if view.queues or view.instances:
        table = Table(box=None, header_style="bold", pad_edge=False)
        labels = (["instance"] if view.instances else []) + [
            "broker", "topic", "queue", "committed", "end", "lag", "committed message stored"]
        for label in labels:
            table.add_column(label, justify="right" if label in (
                "queue", "committed", "end", "lag") else "left", no_wrap=True)
        for q in (view.instances or view.queues)[:MAX_ROWS]:
            cells = ([q["instance"]] if view.instances else []) + [
                q["broker"], q["topic"], str(q["queue"]), count(q["committed"]),
                count(q["max"]), Text(count(q["lag"]), style="bold" if q["lag"] else ""),
                _age(now_s, q.get("committed_time_ms"))]
            table.add_row(*cells)
        parts.append(table)
        shown = len(view.instances or view.queues)
        if shown > MAX_ROWS:
            parts.append(Text(f"… {shown - MAX_ROWS:,} more (the worst {MAX_ROWS} shown; "
                              f"`floodgate offsets show` lists all)", style="dim"))
    else:
        parts.append(Text("no offsets committed by this group on any broker", style="dim"))
    for line in view.errors:
        parts.append(Text(f"warning: {line}", style="yellow"))
    parts.append(Text("move them: floodgate offsets reset --cluster FILE --group "
                      f"{view.group} --topic T (--to-time … | --to-latest | --by N) "
                      "--dry-run", style="dim"))
    return Group(*parts)
