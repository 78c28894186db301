"""One broker's topics and queues: how many, and its hottest queues first with
their depth, those far hotter than their topic's median queue marked HOT (seed
004's 网红 queue: spread its keys, or give its topic more queues). Bounded by
what the broker sends (its ten hottest), so it draws as fast at 10,000 queues."""

from __future__ import annotations

from rich.text import Text

from console.tui.format import count, rate


def render(state, focus=None):
    broker = state.broker(focus) if focus else None
    s = broker.stats if broker is not None else None
    if s is None:
        return Text("no data", style="dim")
    text = Text()
    text.append(f"{len(s.topics):,} topics, {sum(s.topics.values()):,} queues\n")
    if not s.hottest_queues:
        text.append("no sends in the last 10 s", style="dim")
        return text
    for q in s.hottest_queues:
        hot = bool(q.get("hot"))
        times = q.get("times_median")
        text.append(f"{q.get('topic')}/{q.get('queue')}", style="bold red" if hot else "")
        text.append(f"  {rate(q.get('rate'))}  depth {count(q.get('depth'))}")
        if times:
            text.append(f"  {times:g}x median", style="red" if hot else "dim")
        text.append("  HOT\n" if hot else "\n", style="bold red")
    return text
