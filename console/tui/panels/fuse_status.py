"""Each producer's fuse: what it is doing in one line, its count (excluded
against the cap, overflow apart, as in the header), and the isolated brokers
with reason, time left and whether they serve as overflow."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from console.tui.format import clock, rate
from console.tui.panels.fuse_line import cause_of, describe_fuse


def render(state, focus=None):
    if not state.producers:
        return Text("no producer to ask: start the console with --producers HTTP_ADDR "
                    "(a producer's /stats, e.g. `floodgate bench produce --http-port`)",
                    style="dim")
    parts = []
    for p in state.producers:
        if not p.up:
            parts.append(Text(f"{p.key}: DOWN ({p.error})", style="bold red"))
            continue
        if p.fuse is None:
            parts.append(Text(f"{p.name}: no fuse (sends to every broker)", style="dim"))
            continue
        c, load = p.counts, p.load or {}
        head = Text(f"{p.name}  ", style="bold")
        head.append(f"excluded {len(c.excluded)}/{'-' if c.cap is None else c.cap}  ",
                    style="magenta" if c.at_cap else "")
        head.append(f"overflow {len(c.overflow)}  ", style="yellow" if c.overflow else "")
        if c.dry_run:
            head.append("DRY RUN  ", style="yellow")
        if load:
            sends = load.get("sends") or 0
            head.append(f"sends {rate(sends / (load.get('window_s') or 10))}  "
                        f"errors {load.get('errors', 0)}", style="dim")
        parts += [head, Text(describe_fuse(c))]
        table = Table(box=None, header_style="bold", pad_edge=False)
        for label in ("broker", "reason", "since", "time left", "serving", "offences"):
            table.add_column(label)
        for i in c.isolated:
            left = i.get("left_s")
            table.add_row(str(i.get("broker")), _reason(i),
                          clock(i.get("since_wall")),
                          f"{left:.0f} s" if isinstance(left, int | float) else "-",
                          Text("overflow (cap full)", style="yellow") if i["broker"] in c.overflow
                          else Text("excluded", style="magenta"), str(i.get("offences", "")))
        parts.append(table if c.isolated else Text("no broker isolated", style="green"))
    return Group(*parts)


def _reason(i) -> str:
    """What isolated the broker (the transitions' word), and its latest offence if other."""
    cause, now = cause_of(i)
    return f"{cause}, now {now}" if now else str(cause or "-")
