"""What a master reports of its slaves (`status`, the console, /metrics) and how long
its in-sync slaves have left an append unacknowledged (the node's step-down check)."""

from __future__ import annotations


def in_sync_silence(master, now: float | None = None) -> float | None:
    """How long the in-sync slaves have left an append unacknowledged (the longest;
    inf for one with no open link), or None when the set is empty."""
    if not master.in_sync:
        return None
    now = master.now() if now is None else now
    worst = 0.0
    for name in master.in_sync:
        link = master.links.get(name)
        if link is None or not link.open:
            return float("inf")
        worst = max(worst, master.lag(link, now)[1])
    return worst


def slave_figures(master) -> list[dict]:
    now = master.now()
    out = []
    for name, link in sorted(master.links.items()):
        lag_bytes, lag_s = master.lag(link, now)
        out.append({"name": name, "addr": link.addr, "acked": link.acked,
                    "lag_bytes": lag_bytes, "lag_s": round(lag_s, 6),
                    "in_sync": name in master.in_sync,
                    "linked_s": round(now - link.connected_at, 3)})
    return out
