"""Panels: one module each, all the same shape — `render(state, focus) ->
Rich renderable` — registered in PANELS. Screens name the panels they show;
`widgets.PanelView` draws one. `focus` is the broker a screen is about (or
None), so the same panel serves the cluster and a single broker; for the
consumer-group panels it is the group.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from console.tui.panels import (
    alerts,
    brokers,
    consumer_queues,
    consumers,
    delayed,
    disk,
    event_log,
    events,
    fuse_line,
    fuse_status,
    fuse_timeline,
    heatmap,
    host_figures,
    host_tuning,
    percentiles,
    queues,
    summary,
    throttling,
    throughput,
    transactions,
)

Render = Callable[[Any, str | None], Any]

PANELS: dict[str, Render] = {
    "summary": summary.render,
    "brokers": brokers.render,
    "broker_reasons": brokers.render_reasons,
    "heatmap": heatmap.render,
    "percentiles": percentiles.render,
    "throughput": throughput.render,
    "disk": disk.render,
    "queues": queues.render,
    "events": events.render,
    "fuse_line": fuse_line.render,
    "fuse_status": fuse_status.render,
    "fuse_timeline": fuse_timeline.render,
    "host_tuning": host_tuning.render,
    "host_figures": host_figures.render,
    "alerts": alerts.render,
    "recent_alerts": alerts.render_recent,
    "event_log": event_log.render,
    "consumers": consumers.render,
    "consumers_line": consumers.render_line,
    "consumer_queues": consumer_queues.render,
    "throttling": throttling.render,
    "delayed": delayed.render,
    "transactions": transactions.render,
    "queue_locks": transactions.render_locks,
}


def render_panel(name: str, state, focus: str | None = None):
    """Draw a panel; a panel that trips over odd data says so instead of crashing."""
    from rich.text import Text

    if state is None:
        return Text("waiting for the first poll…", style="dim")
    try:
        return PANELS[name](state, focus)
    except Exception as exc:  # noqa: BLE001 - one bad panel must not end the console
        return Text(f"{name}: cannot draw: {type(exc).__name__}: {exc}", style="red")
