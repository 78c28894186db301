"""Each producer's fuse: cap, isolated brokers with reason and time left,
overflow brokers (isolated but serving because of the cap)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from console.format import clock, rate


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
        fuse, load = p.fuse or {}, p.load or {}
        isolated = fuse.get("isolated") or []
        cap = fuse.get("cap")
        head = Text(f"{p.name}  ", style="bold")
        head.append(f"isolated {len(isolated)}/{cap}  ",
                    style="magenta" if cap and len(isolated) >= cap else "")
        head.append(f"excluded {', '.join(fuse.get('excluded') or []) or '-'}  "
                    f"overflow {', '.join(fuse.get('overflow') or []) or '-'}  ")
        if fuse.get("dry_run"):
            head.append("DRY RUN  ", style="yellow")
        if load:
            sends = load.get("sends") or 0
            head.append(f"sends {rate(sends / (load.get('window_s') or 10))}  "
                        f"errors {load.get('errors', 0)}", style="dim")
        parts.append(head)
        table = Table(box=None, header_style="bold", pad_edge=False)
        for label in ("broker", "reason", "since", "time left", "serving", "offences"):
            table.add_column(label)
        for i in isolated:
            if not isinstance(i, dict):
                continue
            left = i.get("left_s")
            table.add_row(str(i.get("broker")), str(i.get("reason")),
                          clock(i.get("since_wall")),
                          f"{left:.0f} s" if isinstance(left, int | float) else "-",
                          Text("overflow (cap)", style="yellow") if i.get("overflow")
                          else Text("excluded", style="magenta"), str(i.get("offences", "")))
        parts.append(table if isolated else Text("no broker isolated", style="green"))
    return Group(*parts)
