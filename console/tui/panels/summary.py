"""The cluster header: total rate, cluster p99 and max, availability, the
fuse's count (excluded against the cap, overflow apart), and on a second line
what the fuse is doing; a third, when there are any, sums up consumer groups
and flow control."""

from __future__ import annotations

from rich.text import Text

from console.tui.format import STATE_STYLE, clock, ms, pct, rate
from console.tui.panels import consumers, fuse_line


def render(state, focus=None):
    s, limit = state.summary, state.sla.max_s
    sla = state.brokers and s.max is not None and s.max > limit
    text = Text()
    text.append(f"{clock(state.now)}  ", style="dim")
    text.append(f"{s.brokers} broker{'s' if s.brokers != 1 else ''} ")
    for name in ("UP", "SLOW", "FAILING", "ISOLATED", "DOWN"):
        n = s.by_state.get(name, 0)
        if n:
            text.append(f"{n} {name} ", style=STATE_STYLE[name])
    text.append(f"│ in {rate(s.in_per_s)} out {rate(s.out_per_s)} ")
    text.append("│ cluster send p99 ")
    text.append(ms(s.p99), style="red" if s.p99 is not None and s.p99 > limit else "")
    text.append(" max ")
    text.append(ms(s.max), style="bold red" if sla else "")
    text.append(f" │ availability {pct(s.availability, 2)} ")
    at_cap = s.cap is not None and s.cap > 0 and s.isolated >= s.cap
    if s.cap is None:  # no producer watched: its fuse is not known ("0/-" said nothing)
        text.append("│ fuse: no producer watched", style="dim")
    else:
        text.append(f"│ excluded {s.isolated}/{s.cap}", style="magenta" if at_cap else "")
    if s.overflow:
        text.append(f" +{s.overflow} overflow", style="yellow")
    text.append("\n")
    text.append_text(fuse_line.render(state))
    for p in state.producers:
        if (behind := p.behind) is not None:
            text.append(f"\nproducer {p.name} behind: {rate(behind[0])} of {rate(behind[1])} "
                        f"({behind[0] / behind[1]:.0%}): the host cannot carry the "
                        f"rate it was asked for", style="yellow")
    groups = consumers.cluster_line(state)
    if groups is not None:
        text.append("\n")
        text.append_text(groups)
    return text
