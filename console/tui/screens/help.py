"""`?`: what the keys do and what the states mean."""

from __future__ import annotations

from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

from heatmap.sla import FUSE_CAP_RATIO, SLA_MAX_MS, SLA_MEAN_MS

# the Double-11 talk's lines from heatmap.sla, not written here again
HELP = f"""[b]floodgate console[/b]

[b]c[/b] cluster  [b]g[/b] groups  [b]f[/b] fuse  [b]h[/b] host  [b]a[/b] alerts  [b]t[/b] trace  [b]?[/b] help  [b]q[/b] quit
[b]Enter[/b] open the broker (heatmap) or group (queues)   [b]Esc[/b] back   [b][ ][/b] prev/next
[b]s[/b] sort by the next column   [b]r[/b] reverse   [b]/[/b] filter   [b]ctrl+p[/b] commands

[b]States[/b]
[green]UP[/green]        answering, send p99 and max within the SLA
[yellow]SLOW[/yellow]      send p99 or max over {SLA_MAX_MS:g} ms in the last 10 s
[red]FAILING[/red]   failed sends itself in the last 10 s (error, busy, disk, timeout)
[magenta]ISOLATED[/magenta]  a producer's fuse excludes it (slow or failing)
[red]DOWN[/red]      no answer for two refreshes (the reason is shown)
A [b]?[/b] after a state: the last poll failed, the row is stale.

[b]Groups[/b] [green]OK[/green]; [yellow]WARNING[/yellow] lag growing over 10 s; [red]STALLED[/red] alive, offsets
still 2 s while messages wait; [red]STOPPED[/red] lag, no consumer heard for 10 s.
[b]o[/b] on a group: its offsets per queue (move them with `floodgate offsets reset`);
retry / dead: messages kept in %RETRY% / %DLQ%; a broadcast group: a row per instance.
[b]Fuse[/b] excluded n/cap: isolated, not serving (cap: {FUSE_CAP_RATIO * 100:g} % of the brokers);
overflow: isolated too, serving again because the cap is full (the earliest isolated first).
[b]Alerts[/b] send average over {SLA_MEAN_MS:g} ms, max over {SLA_MAX_MS:g} ms (latest and worst figure),
sends failed or refused, a broker down, a fuse at its cap; a group not OK; throttling.
[b]Trace[/b] a key or message id: sent, stored, delivered per group, what is missing;
[b]t[/b] on a broker: the slowest traced sends of its spike second.

Press any key to close."""


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "Close")]

    def compose(self):
        yield Static(HELP, id="help")

    def on_key(self, event) -> None:
        event.stop()
        self.app.pop_screen()
