"""Disk and flush: used share, store size, flush lag and flush latency."""

from __future__ import annotations

from rich.text import Text

from console.data.state import num
from console.tui.format import count, ms, pct, size


def render(state, focus=None):
    broker = state.broker(focus) if focus else None
    if broker is None or broker.doc is None:
        return Text("no data", style="dim")
    d = broker.doc
    text = Text()
    ratio = num(d, "disk", "used_ratio")
    text.append(f"disk used {pct(ratio, 1)} of {size(num(d, 'disk', 'total_bytes'))}  ",
                style="red" if ratio and ratio > 0.75 else "")
    text.append(f"store {size(num(d, 'disk', 'store_bytes'))}\n")
    text.append(f"flush ({d.get('flush_mode', '?')}) lag {size(num(d, 'flush_lag_bytes'))}  "
                f"p99 {ms(num(d, 'ops', 'flush', '10s', 'p99'))}  "
                f"max {ms(num(d, 'ops', 'flush', '10s', 'max'))}\n")
    text.append(f"commitlog max offset {count(num(d, 'commitlog', 'max_offset'))}  "
                f"in flight {count(num(d, 'inflight_writes'))}")
    return text
