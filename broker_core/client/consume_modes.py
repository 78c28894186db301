"""How a consumer shares its topic's queues and what becomes of a message its handler
failed: RocketMQ's three ways, one small class each. `Consumer(broadcast=…, orderly=…)`
picks one; the consumer core (client.consumer) asks it at the few points where they
differ and does everything else the same way.

- `Clustering` (the default, RocketMQ's CLUSTERING): each queue has one owner in the
  group (client.membership's averaging allocation); offsets live on the brokers; a
  failed message goes back to the group's retry topic (client.retry) and comes again
  after a growing delay, then to the dead-letter queue.
- `Broadcast` (BROADCASTING): every instance reads every queue; its offsets are its own,
  kept in a file it names (client.offsets_file) and told to the brokers in its
  heartbeats only so that they can judge its lag; a failed message is counted and
  logged, not retried (there is no group to retry it for, as in RocketMQ).
- `Orderly` (MessageListenerOrderly): each owned queue is locked on its master
  (client.orderly) and handled one message at a time in offset order; a failed
  message is retried in place (its queue waits, the same message comes again) up to
  `max_reconsume` times, then goes to the dead-letter queue, never to the retry topic
  (that would put it behind the messages that followed it).
- `ExactlyOnce` (a transform's input: client.transform): orderly's locks, and offsets
  committed only inside the transform's transactions, never by the consumer itself.
"""

from __future__ import annotations

import logging
import math

from broker_core.client.membership import allocate
from broker_core.client.offsets_file import OffsetsFile
from broker_core.client.orderly import InPlaceRetries, QueueLeases
from broker_core.client.retry import send_back
from broker_core.errors import BrokerError
from broker_core.protocol.record import Message

log = logging.getLogger("floodgate.consumer")

Queue = tuple[str, int]  # (broker, queue id)


class Clustering:
    """Queues shared in the group, offsets on the brokers, failures to the retry topic."""

    reads_retry_topic = True  # the core also reads the group's retry topic

    def __init__(self, consumer) -> None:
        self.consumer = consumer

    def owned(self, members: list[str], queues: list[Queue]) -> list[Queue]:
        return allocate(members, queues, self.consumer.client_id)

    def beat_offsets(self) -> dict[Queue, int] | None:
        """Offsets the heartbeats carry (a broadcast instance's own): none here."""
        return None

    def own_offset(self, queue: Queue) -> int | None:
        """An offset of its own for a queue new to it, asked before the brokers."""
        return None

    def from_group(self, committed: int) -> int:
        """Where a queue new to it is read from, given the group's offset on its broker
        (-1 for none: then from its first message kept)."""
        return committed

    def pullable(self, queue: Queue) -> bool:
        return True

    def due(self, now: float) -> float:
        """When the mode needs the poll loop awake (an orderly lock to ask again for)."""
        return math.inf

    def on_wake(self, now: float) -> None:
        """Between heartbeats, each pass of the poll loop."""

    def moving(self, lost: set[Queue]) -> None:
        """Queues rebalanced away, after their offsets were committed."""

    def settled(self) -> None:
        """A round of heartbeats has been heard."""

    def nack(self, message: Message, delay) -> str:
        c = self.consumer
        try:
            return send_back(c.sender_for_nacks(), c.group, message,
                             delay if delay is not None else c.retry_delay, c.max_reconsume)
        except Exception:
            # not sent back: read it again (and what followed it in its queue) rather than
            # commit past it; from the retry topic if that is where it came from
            c.rewind(message)
            raise

    def consume(self, handler, max_msgs: int, timeout: float, stop) -> None:
        """Until `stop` is set: a failed message is sent back; offsets ride the next pulls
        after each batch, and are committed at once when it stops."""
        c = self.consumer
        while stop is None or not stop.is_set():
            # send-backs go out without holding up the batch; all are acknowledged (or the
            # message's queue rewound) before the commit that covers them
            backs = []
            for m in c.poll(max_msgs, timeout):
                try:
                    handler(m)
                except Exception:  # noqa: BLE001 - the handler's failure: retried later
                    if (fut := self.failed(m)) is not None:
                        backs.append((m, fut))
            for m, fut in backs:
                try:
                    fut.result()
                except BrokerError as exc:  # not sent back: it comes again (rewound)
                    log.warning("%s: could not send %s back: %s", c.group, m.msg_id, exc)
                    c.rewind(m)
            c.commit(wait=False)  # riding the next pulls: no round trip a batch
        c.commit()

    def failed(self, message: Message):
        """A handler failed `message` in `consume`: the future of its send-back."""
        c = self.consumer
        _kind, fut = send_back(c.sender_for_nacks(), c.group, message, c.retry_delay,
                               c.max_reconsume, wait=False)
        return fut

    def commit(self, wait: bool) -> bool:
        """True when the mode kept the offsets itself (nothing for the brokers)."""
        return False

    def close(self) -> None:
        """After the last commit, before the farewell heartbeat."""


class Broadcast(Clustering):
    """Every queue read by every instance; its offsets in its own file."""

    reads_retry_topic = False

    def __init__(self, consumer, offsets_file) -> None:
        super().__init__(consumer)
        if offsets_file is None:
            raise ValueError("a broadcast consumer keeps its offsets in a file of its own: "
                             "give offsets_file")
        self.file = OffsetsFile(offsets_file, consumer.group, consumer.topic,
                                consumer.client_id, consumer.clock)
        consumer.committed.update(self.file.saved)
        self.failed_count = 0  # messages whose handler raised (not retried)

    def owned(self, members: list[str], queues: list[Queue]) -> list[Queue]:
        return sorted(queues)

    def beat_offsets(self) -> dict[Queue, int]:
        return self.consumer.committed

    def own_offset(self, queue: Queue) -> int | None:
        return self.file.saved.get(queue)

    def from_group(self, committed: int) -> int:
        # a queue new to this instance starts from its first message kept, as a clustering
        # group with no offset does (a group's offsets are not its own)
        return -1

    def nack(self, message: Message, delay) -> str:
        raise ValueError("a broadcast consumer does not send messages back: there is no "
                         "group to retry them for")

    def failed(self, message: Message):
        self.failed_count += 1  # not retried (RocketMQ's rule): said and counted
        log.warning("%s: handler failed on %s (broadcast: not retried)",
                    self.consumer.group, message.msg_id, exc_info=True)
        return None

    def commit(self, wait: bool) -> bool:
        c = self.consumer
        c.committed.update(c.pulls.delivered)
        self.file.save(c.committed)
        return True

    def close(self) -> None:
        self.file.save(self.consumer.committed, force=True)


class Orderly(Clustering):
    """Each owned queue locked, one message at a time, a failure retried in place."""

    reads_retry_topic = False

    def __init__(self, consumer) -> None:
        super().__init__(consumer)
        c = consumer
        self.leases = QueueLeases(c.group, c.topic, c.client_id, c.call_json, c.clock)
        self.in_place = InPlaceRetries(c.max_reconsume, c.pulls, self._dead_letter, c.clock)

    def _dead_letter(self, message: Message) -> str:
        c = self.consumer
        return send_back(c.sender_for_nacks(), c.group, message, None, c.max_reconsume)

    @property
    def locked(self) -> list[Queue]:
        """The queues whose locks it trusts now."""
        return sorted(self.leases.held())

    def pullable(self, queue: Queue) -> bool:
        return self.leases.valid(queue) and not self.in_place.waiting(queue)

    def _missing(self) -> bool:
        return len(self.leases.held()) < len(self.consumer.assignment)

    def due(self, now: float) -> float:
        due = self.in_place.next_resume(now)
        return min(due, self.leases.retry_at) if self._missing() else due

    def on_wake(self, now: float) -> None:
        if now >= self.leases.retry_at and self._missing():
            self.relock()

    def moving(self, lost: set[Queue]) -> None:
        self.leases.release(lost)  # committed first: the next holder starts there

    def settled(self) -> None:
        self.relock()

    def relock(self) -> None:
        """Renew the owned queues' locks; a queue won or lost starts again from its
        committed offset (another holder may have moved it)."""
        gained, lost = self.leases.renew(self.consumer.assignment)
        for queue in gained | lost:
            self.consumer.pulls.drop(queue)
            self.consumer.committed.pop(queue, None)

    def nack(self, message: Message, delay) -> str:
        queue = self.consumer.pulls.queue_of(message)
        if queue is None:
            raise ValueError(f"{message.msg_id} was not handed out by this consumer")
        return self.in_place.failed(queue, message)  # its queue is read again from it

    def consume(self, handler, max_msgs: int, timeout: float, stop) -> None:
        """Until `stop` is set: one queue's messages in order while its lock holds; a
        failure holds its queue back for the rest of the batch, to be retried in place."""
        c = self.consumer
        while stop is None or not stop.is_set():
            held_back: set[Queue] = set()  # queues whose turn in this batch is over
            for m in c.poll(max_msgs, timeout):
                queue = c.pulls.queue_of(m)
                if queue is None or queue in held_back:
                    continue
                if not self.leases.valid(queue):  # lapsed meanwhile: another may hold it
                    c.pulls.drop(queue)
                    held_back.add(queue)
                    continue
                try:
                    handler(m)
                except Exception:  # noqa: BLE001 - the handler's failure: retried in place
                    log.warning("%s: handler failed on %s (orderly: retried in place)",
                                c.group, m.msg_id, exc_info=True)
                    if self.in_place.failed(queue, m) == "retry":
                        held_back.add(queue)
                    continue
                self.in_place.done(queue, m)
            c.commit()

    def close(self) -> None:
        self.leases.release(self.consumer.assignment)


class ExactlyOnce(Orderly):
    """Orderly's locks; the offsets move only with the transactions that commit what was
    made of the messages (client.transform), never by a commit of the consumer's."""

    def commit(self, wait: bool) -> bool:
        return True  # nothing to do: a transaction carried them, or nothing may

    def nack(self, message: Message, delay) -> str:
        raise ValueError("an exactly-once transform's input is not sent back: its queue "
                         "is read again from the group's offset when a transaction fails")

    def consume(self, handler, max_msgs: int, timeout: float, stop) -> None:
        raise ValueError("an exactly-once consumer is read by client.transform.Transform")
