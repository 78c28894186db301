"""An orderly consumer's side of the queue locks (server.queue_locks).

The consumer processes a queue only while its lock there is trusted: for
TRUST_S after the LOCK_BATCH that granted or renewed it was *sent* (half the
broker's lease, so a holder that cannot renew has stopped long before the broker
gives the queue to another client). Locks are renewed with every heartbeat;
owned queues without one are asked for again every RETRY_S; a queue rebalanced
away is committed, then released (UNLOCK_BATCH).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from broker_core.client.connection import BrokerUnavailable
from broker_core.errors import BrokerError
from broker_core.protocol import Op
from broker_core.protocol.orderly import LOCK_LEASE_S

log = logging.getLogger("floodgate.consumer")

TRUST_S = LOCK_LEASE_S / 2
RETRY_S = 1.0  # an owned queue without its lock is asked for again this often
SUSPEND_S = 1.0  # a queue whose message failed waits this long before it is tried again

Queue = tuple[str, int]  # (broker, queue id)


class QueueLeases:
    """`call_json(broker, op, payload) -> dict`; `clock`: monotonic."""

    def __init__(self, group: str, topic: str, client_id: str,
                 call_json: Callable[[str, Op, dict], dict],
                 clock: Callable[[], float]) -> None:
        self.group, self.topic, self.client_id = group, topic, client_id
        self._call, self._clock = call_json, clock
        self._granted: dict[Queue, float] = {}  # queue -> when the renewal that won it was sent
        self.retry_at = 0.0
        self.lost = 0  # locks that lapsed or were refused while this client held them

    def valid(self, queue: Queue) -> bool:
        sent = self._granted.get(queue)
        return sent is not None and self._clock() - sent < TRUST_S

    def held(self) -> set[Queue]:
        return {q for q in self._granted if self.valid(q)}

    def renew(self, owned: Iterable[Queue]) -> tuple[set[Queue], set[Queue]]:
        """Lock (or renew) every owned queue: (newly held, no longer held)."""
        before = self.held()
        by_broker: dict[str, list[int]] = {}
        for broker, qid in owned:
            by_broker.setdefault(broker, []).append(qid)
        for broker, qids in by_broker.items():
            sent = self._clock()
            try:
                answer = self._call(broker, Op.LOCK_BATCH, {
                    "group": self.group, "client_id": self.client_id, "topic": self.topic,
                    "queues": sorted(qids)})
            except (BrokerUnavailable, BrokerError) as exc:
                log.debug("%s: no lock from %s: %s", self.group, broker, exc)
                continue  # what it held stays trusted until TRUST_S after its last renewal
            locked = set(answer.get("locked", []))
            for qid in qids:
                if qid in locked:
                    self._granted[(broker, qid)] = sent
                else:
                    self._granted.pop((broker, qid), None)
        owned = set(owned)
        for queue in [q for q in self._granted if q not in owned or not self.valid(q)]:
            del self._granted[queue]
        self.retry_at = self._clock() + RETRY_S
        now = self.held()
        self.lost += len(before - now)
        return now - before, before - now

    def release(self, queues: Iterable[Queue]) -> None:
        by_broker: dict[str, list[int]] = {}
        for broker, qid in queues:
            self._granted.pop((broker, qid), None)
            by_broker.setdefault(broker, []).append(qid)
        for broker, qids in by_broker.items():
            try:
                self._call(broker, Op.UNLOCK_BATCH, {
                    "group": self.group, "client_id": self.client_id, "topic": self.topic,
                    "queues": sorted(qids)})
            except (BrokerUnavailable, BrokerError):
                pass  # the lease runs out on the broker instead
