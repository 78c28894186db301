"""Disk and flush: used share, store size, flush lag and flush latency."""

from __future__ import annotations

from rich.text import Text

from broker_core.store.config import DISK_MAX_USED_RATIO
from console.tui.format import count, ms, pct, size


def render(state, focus=None):
    broker = state.broker(focus) if focus else None
    s = broker.stats if broker is not None else None
    if s is None:
        return Text("no data", style="dim")
    text = Text()
    ratio = s.disk.used_ratio
    text.append(f"disk used {pct(ratio, 1)} of {size(s.disk.total_bytes)}  ",
                style="red" if ratio and ratio > DISK_MAX_USED_RATIO else "")
    text.append(f"store {size(s.disk.store_bytes)}\n")
    flush = s.window("flush", "10s")
    text.append(f"flush ({s.flush_mode or '?'}) lag {size(s.flush_lag_bytes)}  "
                f"p99 {ms(flush.p99)}  max {ms(flush.max)}\n")
    text.append(f"commitlog max offset {count(s.commitlog.max_offset)}  "
                f"in flight {count(s.inflight_writes)}")
    return text
