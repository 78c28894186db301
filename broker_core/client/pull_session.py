"""A consumer's side of a pull session (`protocol.pull`): a broker keeps the queues a
consumer reads there, and each pull sends what changed since the last."""

from __future__ import annotations

import secrets

from broker_core.protocol import QUEUE_GONE

SESSION_QUEUES = 16  # a pull of more queues opens a pull session (then sends what changed)


class SessionView:
    """A pull session as its broker has it (`protocol.pull`): the address it lives on,
    its id, the last epoch sent and each queue's offset as last sent. Updated when a
    pull is sent (the broker applies pulls in their order); a pull that failed, or an
    answer PULL_SESSION_GONE, drops it: the next pull names every queue again."""

    __slots__ = ("addr", "sid", "epoch", "offsets")

    def __init__(self, addr: str, offsets: dict[int, int]) -> None:
        self.addr, self.sid, self.epoch, self.offsets = addr, secrets.randbits(64) or 1, 0, offsets

    def next(self, want: dict[int, int]) -> list[tuple[int, int]]:
        """What changed since the last pull (QUEUE_GONE: not read now), for the next epoch."""
        have = self.offsets
        changes = [(q, o) for q, o in want.items() if have.get(q) != o]
        changes += [(q, QUEUE_GONE) for q in have if q not in want]
        self.offsets, self.epoch = want, self.epoch + 1
        return changes
