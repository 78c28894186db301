"""Recent events of a broker (or the cluster), newest first: state changes,
fuse transitions that name it, and the fault injected into it."""

from __future__ import annotations

from rich.text import Text

from console.fault_words import describe
from console.tui.format import clock

LINES = 12


def render(state, focus=None):
    broker = state.broker(focus) if focus else None
    rows: list[tuple[float, str, str]] = []
    for e in state.events:
        if broker is None or e.broker == broker.name:
            rows.append((e.time, f"{e.broker} {e.text}", ""))
    for p in state.producers:
        for t in (p.fuse or {}).get("transitions") or []:
            if not isinstance(t, dict) or broker is not None and t.get("broker") != broker.name:
                continue
            when = t.get("wall_time") or 0.0
            rows.append((when, f"fuse {p.name}: {t.get('event')} {t.get('broker')} "
                               f"({t.get('reason')})", "magenta"))
    rows.sort(key=lambda r: r[0], reverse=True)  # newest first: a short panel keeps them
    text = Text(no_wrap=True, overflow="ellipsis")  # one line each, however narrow
    if broker is not None and broker.fault:  # "fault active for 10 s: errors 50 %, ..."
        text.append(describe(broker.fault) + "\n", style="bold yellow")
    for when, line, style in rows[:LINES]:
        text.append(f"{clock(when)} ", style="dim")
        text.append(line + "\n", style=style)
    if not rows and not text:
        text.append("no events yet", style="dim")
    text.rstrip()
    return text
