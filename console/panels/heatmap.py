"""The send-latency heatmap of the last 5 minutes (seed 000's picture)."""

from __future__ import annotations

from rich.text import Text

from heatmap import LatencyHistogram, TerminalHeatmap, build_heatmap


def series(history):
    out = []
    for h in history:
        try:
            out.append((int(h["ts"]), LatencyHistogram.from_dict(h)))
        except (KeyError, TypeError, ValueError):
            continue  # one bad second is a gap, not a crash
    return out


def render(state, focus=None):
    broker = state.broker(focus) if focus else None
    if broker is None:
        return Text("pick a broker (Enter on the cluster table)", style="dim")
    pairs = series(broker.history)
    if not pairs:
        return Text(f"{broker.name}: no send history yet", style="dim")
    matrix = build_heatmap(pairs, schema=2)
    return TerminalHeatmap(matrix, title=f"{broker.name} send latency, last "
                                         f"{pairs[-1][0] - pairs[0][0] + 1} s")
