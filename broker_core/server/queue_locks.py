"""Queue locks for orderly consumers (RocketMQ's LOCK_BATCH_MQ / UNLOCK_BATCH_MQ).

An orderly consumer processes a queue only while it holds the queue's lock on
the queue's master: a lease of LEASE_S, renewed by every LOCK_BATCH of the
holder (each heartbeat), released by UNLOCK_BATCH on rebalance or close, and
free for another client of the group once a crashed holder's lease ran out.
The consumer trusts its own lock for half the lease after the renewal it sent
(client.orderly), so a holder that cannot renew has stopped long before the
broker hands its queue to someone else.

A lock's epoch is the wall millisecond it was granted to its holder: a transaction
that commits a queue's offsets names the epoch it read under, and is fenced when
the queue has been granted since (server.tx_commits).

Locks live in memory on the master and go to its slaves with the other tables
(ha.node's meta, once a second), as leases left: a promoted slave knows who held
what, and the holder's next renewal finds its queue still its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker_core.protocol.orderly import LOCK_LEASE_S as LEASE_S


@dataclass
class Lock:
    client_id: str
    renewed: float  # monotonic
    since: float  # wall time it was granted to this holder


def epoch_of(lock: Lock) -> int:
    return int(lock.since * 1000)


class QueueLocks:
    def __init__(self, monotonic: Callable[[], float], wall: Callable[[], float],
                 lease_s: float = LEASE_S) -> None:
        self._mono, self._wall, self.lease_s = monotonic, wall, lease_s
        self._locks: dict[tuple[str, str, int], Lock] = {}
        self.granted = 0  # a queue given to a new holder (the console's "lock changes")
        self.expired = 0  # ... of which after the old holder's lease ran out
        self.refused = 0  # a queue asked for while another client held it
        self.version = 0  # bumped at each grant, renewal or release (told to slaves)

    def lock(self, group: str, client_id: str, topic: str, qids: list[int]) -> list[int]:
        """Grant or renew `client_id`'s locks on `qids`; the ones it holds now."""
        now = self._mono()
        held = []
        self.version += 1
        for qid in qids:
            key = (group, topic, qid)
            lock = self._locks.get(key)
            if lock is not None and lock.client_id != client_id:
                if now - lock.renewed < self.lease_s:
                    self.refused += 1
                    continue
                self.expired += 1
            if lock is None or lock.client_id != client_id:
                self._locks[key] = Lock(client_id, now, self._wall())
                self.granted += 1
            else:
                lock.renewed = now
            held.append(qid)
        return held

    def epochs(self, group: str, client_id: str, topic: str, qids: list[int]) -> dict[int, int]:
        """The epochs of the locks `client_id` holds among `qids`."""
        out = {}
        for qid in qids:
            lock = self._locks.get((group, topic, qid))
            if lock is not None and lock.client_id == client_id:
                out[qid] = epoch_of(lock)
        return out

    def holds(self, group: str, client_id: str, topic: str, qid: int, epoch: int) -> bool:
        """`client_id` holds the queue now, under the lock of `epoch`, its lease running."""
        lock = self._locks.get((group, topic, qid))
        return (lock is not None and lock.client_id == client_id and epoch_of(lock) == epoch
                and self._mono() - lock.renewed < self.lease_s)

    def unlock(self, group: str, client_id: str, topic: str, qids: list[int]) -> int:
        """Release the ones `client_id` holds; how many it released."""
        n = 0
        for qid in qids:
            key = (group, topic, qid)
            lock = self._locks.get(key)
            if lock is not None and lock.client_id == client_id:
                del self._locks[key]
                n += 1
        self.version += n > 0
        return n

    def holders(self) -> list[dict]:
        """Live locks, for `/stats` and the console: who holds which queue since when."""
        now = self._mono()
        self._drop_expired(now)
        return [{"group": g, "topic": t, "queue": q, "client_id": lock.client_id,
                 "since": lock.since, "lease_left_s": round(self.lease_s - (now - lock.renewed), 1)}
                for (g, t, q), lock in sorted(self._locks.items())]

    def _drop_expired(self, now: float) -> None:
        for key in [k for k, lock in self._locks.items() if now - lock.renewed >= self.lease_s]:
            del self._locks[key]

    # -- to the slaves and back ---------------------------------------------------------
    def document(self) -> list[list]:
        """[group, topic, queue, client, since, lease left]: what a slave adopts."""
        return [[d["group"], d["topic"], d["queue"], d["client_id"], d["since"],
                 d["lease_left_s"]] for d in self.holders()]

    def adopt(self, doc: list) -> None:
        """A master's locks (replacing these): each keeps the lease it had left there."""
        now = self._mono()
        locks = {}
        for row in doc:
            try:
                group, topic, qid, client, since, left = row
                locks[(str(group), str(topic), int(qid))] = Lock(
                    str(client), now - (self.lease_s - float(left)), float(since))
            except (TypeError, ValueError):
                continue
        self._locks = locks

    def figures(self) -> dict:
        return {"held": len(self.holders()), "granted_total": self.granted,
                "expired_total": self.expired, "refused_total": self.refused}
