"""Sends per second over the last minute, and the 1/10/60 s rates."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from console.tui.format import Sparkline, rate, size


def render(state, focus=None):
    broker = state.broker(focus) if focus else None
    stats = broker.stats if broker is not None else None
    if stats is None:
        return Text("no data", style="dim")
    text = Text()
    for op in ("send", "pull"):
        parts = [f"{w} {rate(stats.window(op, w).msgs_per_s)}" for w in ("1s", "10s", "60s")]
        bps = stats.window(op, "10s").bytes_per_s
        text.append(f"{op:5} " + "  ".join(parts) + f"  {size(bps)}/s\n")
    errors = stats.window("send", "10s").errors
    text.append(f"send errors (10 s) {errors or 0:,}", style="red" if errors else "dim")
    counts = [float(h.count) for _, h in broker.history[-60:]]
    return Group(Sparkline(counts, "green"), text)
