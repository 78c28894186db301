"""A raft leader a client's fuse found slow hands its group to a follower, when the
operator allows it (`broker serve --fuse-moves-leader`, `cluster up ... --fuse-moves-leaders`).

Why: in a group of three, a slow leader makes every send slow (each waits for its
disk, its loop), while a slow follower slows none (the leader and the other follower
are a majority). The fuse can only isolate the group for a minute; moving the
leadership puts the slow member where its slowness costs nothing, and the group is
writable again within a leadership transfer (tens of ms). The Mogujie talk's Corgi
prefers a leader for the same reason.

Bounded so that clients cannot make a group dance: a leader that has led for less than
a minute stays (so a group moves at most once a minute, whichever member leads; the
fuse's isolation is a minute too), and the group goes only to a follower that holds
everything committed and answered within an election timeout.
"""

from __future__ import annotations

from dataclasses import dataclass

EVERY_S = 60.0  # a leader younger than this stays (the fuse's isolation is a minute)


@dataclass
class StepAside:
    allowed: bool = False  # the operator's word
    every_s: float = EVERY_S
    moves: int = 0
    refused: int = 0

    def choose(self, node, now: float, led_s: float) -> tuple[str | None, str]:
        """(the follower to hand the group to, or None; why, in words). `led_s`: how
        long this leader has led."""
        if not self.allowed:
            self.refused += 1
            return None, ("the operator has not allowed the fuse to move leaders "
                          "(broker serve --fuse-moves-leader)")
        if node.transfer_to:  # several clients' fuses say it at once
            return None, f"already handing the group to {node.transfer_to}"
        if led_s < self.every_s:
            self.refused += 1
            return None, (f"it has led for {led_s:.0f} s: a group moves at most once in "
                          f"{self.every_s:g} s")
        fresh = [p for p in node.peers if p in node.voters and node.match.get(p, 0) >= node.commit
                 and now - node.heard.get(p, -1e18) < node.election_s]
        if not fresh:
            self.refused += 1
            return None, "no follower holds everything committed and answers"
        to = max(fresh, key=lambda p: (node.match.get(p, 0), node.heard.get(p, -1e18)))
        self.moves += 1
        return to, "a client's fuse found this leader slow"
