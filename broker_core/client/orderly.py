"""An orderly consumer's side of the queue locks (server.queue_locks), and its
failed messages, retried in place.

The consumer processes a queue only while its lock there is trusted: for
TRUST_S after the LOCK_BATCH that granted or renewed it was *sent* (half the
broker's lease, so a holder that cannot renew has stopped long before the broker
gives the queue to another client). Locks are renewed with every heartbeat;
owned queues without one are asked for again every RETRY_S; a queue rebalanced
away is committed, then released (UNLOCK_BATCH).

A failed message is retried in place (RocketMQ's SUSPEND_CURRENT_QUEUE_A_MOMENT):
its queue waits SUSPEND_S and the same message comes again, up to
`max_reconsume` times, then it goes to the dead-letter queue and the queue moves
on (not to the retry topic: that would put it behind the messages that followed it).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Iterable

from broker_core.client.connection import BrokerUnavailable
from broker_core.client.pulls import Pulls
from broker_core.client.retry import PROP_RETRY_TIMES
from broker_core.errors import BrokerError
from broker_core.protocol import Op
from broker_core.protocol.orderly import LOCK_LEASE_S
from broker_core.protocol.record import Message

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
        self.epochs: dict[Queue, int] = {}  # the lock's epoch, as the broker said
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
            epochs = answer.get("epochs") or {}
            for qid in qids:
                if qid in locked:
                    self._granted[(broker, qid)] = sent
                    if str(qid) in epochs:
                        self.epochs[(broker, qid)] = int(epochs[str(qid)])
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


class InPlaceRetries:
    """`send_back(message)` sends a message whose tries are spent to the dead-letter
    queue ("dlq"; BrokerError when it could not); `clock`: monotonic."""

    def __init__(self, max_reconsume: int, pulls: Pulls,
                 send_back: Callable[[Message], str], clock: Callable[[], float]) -> None:
        self.max_reconsume = max_reconsume
        self._pulls, self._send_back, self._clock = pulls, send_back, clock
        self._attempts: dict[tuple[Queue, int], int] = {}  # (queue, offset) -> failures
        self._waiting: dict[Queue, float] = {}  # queue -> not handed out until then

    def waiting(self, queue: Queue) -> bool:
        """Whether `queue` pauses after a failure now."""
        return self._waiting.get(queue, 0.0) > self._clock()

    def next_resume(self, now: float) -> float:
        """When the next paused queue may be read again (inf: none pauses)."""
        return min((t for t in self._waiting.values() if t > now), default=math.inf)

    def failed(self, queue: Queue, message: Message) -> str:
        """`message` comes again after SUSPEND_S ("retry"), or past `max_reconsume` tries
        goes to the dead-letter queue ("dlq") and its queue moves on. A dead letter that
        could not be sent is retried after the pause."""
        key = (queue, message.queue_offset)
        fails = self._attempts.get(key, 0) + 1
        if fails > self.max_reconsume:
            spent = dataclasses.replace(message, properties={
                **(message.properties or {}), PROP_RETRY_TIMES: str(self.max_reconsume)})
            try:
                kind = self._send_back(spent)
            except BrokerError:
                fails = self.max_reconsume  # tried again after the pause
            else:
                self._attempts.pop(key, None)
                return kind
        self._attempts[key] = fails
        pulls = self._pulls
        pulls.clear(queue)
        pulls.offsets[queue] = pulls.delivered[queue] = message.queue_offset
        self._waiting[queue] = self._clock() + SUSPEND_S
        return "retry"

    def done(self, queue: Queue, message: Message) -> None:
        """`message` was handled: its failures are forgotten."""
        self._attempts.pop((queue, message.queue_offset), None)
