"""A producer's side of idempotent sends (protocol.idempotence): its id, and the next
sequence for each broker group.

The id is random (63 bits), not handed out by a broker: no round trip before the first
send and no table of ids to replicate, at a chance of two producers colliding of about
one in 2 x 10^9 for a hundred thousand producers alive together (n^2 / 2^64). A send takes its number
from the group it first goes to and keeps it on every retry there; a send that was
never written to a group (refused, or no connection) goes to another with that one's
next number. A send whose answer was lost (a timeout, a link cut after it was written)
may be stored: it is retried on the same group only, where the broker answers a
stored one from its first try (client.attempts.SendPlan).
"""

from __future__ import annotations

import os
import threading

from broker_core.protocol import FLAG_FIRST_TRY, FLAG_IDEMPOTENT, Op
from broker_core.protocol.idempotence import MAX_SEQ, with_id

IDEMPOTENT_OPS = frozenset({Op.SEND, Op.SEND_MULTI})
# waits before the retries of a send whose first try may be stored, on its group only: long
# enough for a failover to promote the slave (a controller takes a few seconds)
SAME_GROUP_BACKOFF_S = (0.05, 0.5, 1.5, 3.0)
# a send's deadline at most (SendOptions.deadline_s): well within the broker's memory of it
# (producer_seqs.WINDOW_S, 120 s)
RETRY_HORIZON_S = 60.0


class Idempotence:
    def __init__(self, pid: int | None = None) -> None:
        self.pid = int.from_bytes(os.urandom(8), "big") >> 1 if pid is None else pid
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, group: str, n: int = 1) -> int:
        """The first of `n` sequences for a send to `group` (0 again past 2^32)."""
        with self._lock:
            seq = self._next.get(group, 0)
            if seq + n - 1 > MAX_SEQ:
                seq = 0
            self._next[group] = seq + n
            return seq

    def frame(self, group: str, op: Op, payload: bytes, seq: int | None
              ) -> tuple[int, bytes, int | None]:
        """(frame flags, body, the sequence) of `payload` sent to `group` (`seq`: the one
        this send took there before, None if it has not been there: a first try, which
        a new master still reading back what it holds stores at once)."""
        flags = FLAG_IDEMPOTENT
        if seq is None:
            seq = self.take(group, multi_count(payload) if op == Op.SEND_MULTI else 1)
            flags |= FLAG_FIRST_TRY
        return flags, with_id(self.pid, seq, payload), seq


def multi_count(payload: bytes) -> int:
    """The number of messages of a SEND_MULTI body (protocol.multi: topic, queue, count)."""
    at = 2 + (payload[0] << 8 | payload[1]) + 4
    return payload[at] << 8 | payload[at + 1]
