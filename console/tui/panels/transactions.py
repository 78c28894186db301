"""Transactions and ordered queues, per broker (server.transactions, server.queue_locks):
half messages pending, the oldest, check-backs, commits and rollbacks by who
decided; and which client of which orderly group holds which queue, since when.
The groups screen shows both under the groups; `floodgate tx list` names each half."""

from __future__ import annotations

import time

from rich.table import Table
from rich.text import Text

from console.tui.format import count

STUCK_S = 60.0  # a half this old is shown red: check-backs have not settled it
LOCK_ROWS = 12  # lock rows drawn (per group and client: their queues on one line)


def _masters(state):
    for b in state.brokers:
        if b.stats is not None and getattr(b, "role", None) != "SLAVE":
            yield b


def render(state, focus=None) -> Table | Text:
    rows = [(b.name, b.stats.transactions) for b in _masters(state)
            if (b.stats.transactions or {}).get("halves_total")]
    if not rows:
        return Text("no transactional messages", style="dim")
    table = Table(box=None, header_style="bold", pad_edge=False)
    for label, right in (("broker", False), ("pending", True), ("oldest", True),
                         ("committed", True), ("rolled back (by)", False),
                         ("check-backs", True)):
        table.add_column(label, justify="right" if right else "left", no_wrap=True)
    for name, t in rows:
        oldest = t.get("oldest_pending_s") or 0.0
        rolled = t.get("rolled_back") or {}
        table.add_row(name, count(t.get("pending") or 0),
                      Text(f"{oldest:.0f} s" if oldest else "-",
                           style="red" if oldest >= STUCK_S else ""),
                      count(t.get("committed_total") or 0),
                      ", ".join(f"{by} {count(n)}" for by, n in sorted(rolled.items())) or "-",
                      count(t.get("checks_total") or 0))
    return table


def render_locks(state, focus=None) -> Table | Text:
    held: dict[tuple[str, str, str, str], list[int]] = {}
    since: dict[tuple[str, str, str, str], float] = {}
    changes = 0
    for b in _masters(state):
        locks = b.stats.locks or {}
        changes += int(locks.get("granted_total") or 0)
        for h in locks.get("holders") or []:
            key = (h["group"], h["topic"], h["client_id"], b.name)
            held.setdefault(key, []).append(int(h["queue"]))
            since[key] = min(since.get(key, h["since"]), h["since"])
    if not held:
        return Text("no orderly consumer holds a queue", style="dim")
    table = Table(box=None, header_style="bold", pad_edge=False,
                  caption=f"{count(changes)} lock changes since the brokers started",
                  caption_justify="left")
    for label in ("group", "topic", "client", "broker", "queues", "held for"):
        table.add_column(label, justify="right" if label == "held for" else "left",
                         no_wrap=True)
    now = time.time()
    for key in sorted(held)[:LOCK_ROWS]:
        group, topic, client, broker = key
        table.add_row(group, topic, client, broker,
                      " ".join(str(q) for q in sorted(held[key])),
                      f"{max(0.0, now - since[key]):.0f} s")
    if len(held) > LOCK_ROWS:
        table.add_row(f"… {len(held) - LOCK_ROWS} more", "", "", "", "", "")
    return table
