"""Sends per second over the last minute, and the 1/10/60 s rates."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from console.tui.format import Sparkline, rate, size


def error_line(send10, last: str, codes, refusal: str = "") -> Text:
    """Send errors over 10 s, the broker's own failures apart from the refused, the latest
    failure and refusal, and every code answered since the broker started."""
    errors, failed = send10.errors or 0, send10.failures or 0
    text = Text(f"send errors (10 s) {errors:,}", style="red" if failed else
                "yellow" if errors else "dim")
    if errors:
        text.append(f": failed {failed:,}, refused {errors - failed:,}")
    if last:
        text.append(f"; latest failure {last}", style="red")
    if refusal:
        text.append(f"; latest refused {refusal}", style="yellow")
    if codes:
        text.append("\nsince start: " + ", ".join(
            f"{c} {n:,}" for c, n in sorted(codes.items(), key=lambda i: -i[1])), style="dim")
    return text


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
    text.append_text(error_line(stats.window("send", "10s"), broker.last_failure,
                                stats.send_error_codes, broker.last_refusal))
    counts = [float(h.count) for _, h in broker.history[-60:]]
    return Group(Sparkline(counts, "green"), text)
