"""Sends per second over the last minute, and the 1/10/60 s rates."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from console.data.state import num
from console.tui.format import Sparkline, rate, size


def render(state, focus=None):
    broker = state.broker(focus) if focus else None
    if broker is None or broker.doc is None:
        return Text("no data", style="dim")
    text = Text()
    for op in ("send", "pull"):
        parts = []
        for w in ("1s", "10s", "60s"):
            parts.append(f"{w} {rate(num(broker.doc, 'ops', op, w, 'msgs_per_s'))}")
        bps = num(broker.doc, "ops", op, "10s", "bytes_per_s")
        text.append(f"{op:5} " + "  ".join(parts) + f"  {size(bps)}/s\n")
    errors = num(broker.doc, "ops", "send", "10s", "errors")
    text.append(f"send errors (10 s) {int(errors or 0):,}",
                style="red" if errors else "dim")
    counts = [float(h.get("count") or 0) for h in broker.history[-60:]]
    return Group(Sparkline(counts, "green"), text)
