"""Pull consumer: the core every mode shares (client.producer is the producer).

Each member heartbeats every broker; the union of live members, sorted, and
the sorted list of (broker, queue) are split evenly (RocketMQ's averaging
allocation), so every queue has exactly one owner once heartbeats agree.
Offsets live on the brokers: `commit()` writes them, a new owner reads them.
Delivery is at-least-once: what was polled but not committed comes again
after a rebalance or a restart.

A consumer reads in one of RocketMQ's three ways, each a small class of
client.consume_modes: clustering (the default), broadcast and orderly.

Pulls are pipelined, one long poll in flight per broker, what they bring buffered
until `poll` hands it out (client.pulls).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
import zlib
from collections.abc import Callable, Mapping, Sequence

from broker_core.client.connection import BrokerUnavailable
from broker_core.client.consume_modes import Broadcast, Clustering, ExactlyOnce, Orderly
from broker_core.client.group_calls import GroupCalls, Refusals
from broker_core.client.membership import GroupMember
from broker_core.client.pool import ConnectionPool
from broker_core.client.producer_setup import normalize_brokers
from broker_core.client.pulls import DownList, Pulls
from broker_core.client.retry import (
    DLQ_PREFIX,
    MAX_RECONSUME,
    RETRY_PREFIX,
    as_first_sent,
    retry_topic,
)
from broker_core.errors import BrokerError
from broker_core.names import topic_problem
from broker_core.protocol import Op
from broker_core.protocol.record import Message
from broker_core.protocol.system_topics import check_group

log = logging.getLogger("floodgate.consumer")

ANSWER_S = 0.02  # a poll that sent pulls waits at least this long for their answers


class Consumer(GroupMember):
    """`routes` (a replicated cluster, e.g. `ha.routes.ZkRoutes`): queues are per group,
    read from the group's master, or from a slave while the master does not answer
    (offsets then live on that slave: they come from the master once a second).

    `trace_rate` (0..1, default off): the share of traced messages (those a producer
    sampled) whose delivery this consumer reports to the trace, with the time of the
    commit that covers it (broker_core.client.tracing.DeliveryTracer)."""

    def __init__(
        self,
        group: str,
        topic: str,
        brokers: Sequence[str] | Mapping[str, str] | str | None = None,
        client_id: str | None = None,
        timeout: float = 3.0,
        clock: Callable[[], float] = time.monotonic,
        routes=None,
        trace_rate: float = 0.0,
        trace=None,
        retry: bool = True,
        max_reconsume: int = MAX_RECONSUME,
        retry_delay: str | float | None = None,
        broadcast: bool = False,
        offsets_file: str | os.PathLike | None = None,
        orderly: bool = False,
        credentials=None,
        exactly_once: bool = False,
        read_from: str = "master",
    ) -> None:
        """`retry`: also read the group's retry topic (client.retry), where `nack` sends
        the messages a handler failed; `max_reconsume` tries before the dead-letter queue;
        `retry_delay`: one delay level for every retry (default: growing from 10 s).
        `broadcast`: read every queue, offsets kept in `offsets_file` (required).
        `orderly`: lock each queue, one message at a time, retried in place (above).
        `exactly_once`: orderly's locks, offsets moved only by a transform's transactions
        (client.transform).
        `read_from="follower"` (with routes): pull from a follower (a raft group's, or a
        slave), the master only while none answers; commits go to the master
        (client.leader_commits). A follower serves what it knows committed: a message
        reaches it with the leader's next entry or beat (100 ms at most)."""
        check_group(group)  # before anything is asked of a broker: its retries need it
        if (problem := topic_problem(topic)) is not None:  # it would wait forever
            raise ValueError(problem)
        if broadcast and (orderly or exactly_once):
            raise ValueError("a consumer is broadcast or orderly, not both: an orderly queue "
                             "has one consumer in its group")
        if read_from not in ("master", "follower"):
            raise ValueError(f"read_from is 'master' or 'follower', not {read_from!r}")
        if read_from == "follower" and routes is None:
            raise ValueError("read_from='follower' needs routes (a replicated cluster)")
        if offsets_file is not None and not broadcast:
            raise ValueError("offsets_file is a broadcast consumer's (a group's offsets live on "
                             "its brokers): give broadcast=True too")
        self.group, self.topic = group, topic
        self.routes = routes
        if routes is not None:
            brokers = {g: g for g in routes.groups}
        self.brokers = normalize_brokers(brokers)
        self.client_id = client_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.timeout = timeout
        self.clock = clock
        # with routes: one connection per broker address, whichever group member answers
        self.credentials = credentials  # acl.credentials (None: FLOODGATE_CREDENTIALS)
        self._pool = ConnectionPool({} if routes is not None else self.brokers, credentials)
        self._owned: list[tuple[str, int]] = []
        self._owned_by_broker: dict[str, list[tuple[str, int]]] = {}
        self.committed: dict[tuple[str, int], int] = {}  # offsets stored, as it knows
        self._down = DownList(clock)  # addresses that failed: not asked for a while
        self.pulls = Pulls(group, topic, self._pool, routes, self._down, timeout, clock,
                           self._pullable)
        self.pulls.on_committed = self._mark_committed
        if read_from == "follower":
            from broker_core.client.leader_commits import LeaderCommits

            self.pulls.read_followers = zlib.crc32(self.client_id.encode())
            self.pulls.leader_commits = LeaderCommits(group, topic, self._pool, routes,
                                                      self._mark_committed)
        self.call_json = GroupCalls(self._pool, routes, self._down, timeout, clock).json
        self._members: tuple[str, ...] = ()
        self._reset = 0  # the last operator's reset of the group's offsets heard of
        self.resets_seen = 0  # how many times this consumer started over for one
        self._next_heartbeat = 0.0
        self._empty_beats = 0  # heartbeats in a row that left it owning no queue
        self._also_refused = False  # a broker refused its retry topic in its heartbeats
        self._refusals = Refusals(group, topic, clock)
        self.tracer = self._own_trace = None
        if trace_rate > 0:
            from broker_core.client.producer import trace_dispatcher
            from broker_core.client.tracing import DeliveryTracer

            if trace is None:
                trace = self._own_trace = trace_dispatcher(
                    None if routes is not None else dict(self.brokers), routes,
                    credentials=credentials)
            self.tracer = DeliveryTracer(trace, trace_rate, group, self.client_id)
        self.max_reconsume = max_reconsume
        self.retry_delay = retry_delay
        self._sender = None  # a Producer, made by the first nack
        self._retry: Consumer | None = None
        # where the three ways differ (client.consume_modes)
        self.mode = (Broadcast(self, offsets_file) if broadcast
                     else ExactlyOnce(self) if exactly_once
                     else Orderly(self) if orderly else Clustering(self))
        if (retry and self.mode.reads_retry_topic
                and not topic.startswith((RETRY_PREFIX, DLQ_PREFIX))):
            self._retry = Consumer(group, retry_topic(group), None if routes else brokers,
                                   self.client_id, timeout, clock, routes, retry=False,
                                   credentials=credentials, trace=trace, trace_rate=trace_rate)

    def _start_offset(self, queue: tuple[str, int]) -> int:
        if (own := self.mode.own_offset(queue)) is not None:
            self.pulls.delivered[queue] = own
            return own
        broker, qid = queue
        answer = self.call_json(
            broker, Op.QUERY_OFFSET, {"group": self.group, "topic": self.topic, "queue_id": qid}
        )
        offset = self.mode.from_group(int(answer.get("offset", -1)))
        if offset < 0:  # no committed offset: consume from the first message kept
            offset = int(answer.get("min_offset", 0))
        self.committed[queue] = self.pulls.delivered[queue] = offset
        return offset

    # -- consuming ----------------------------------------------------------
    def poll(self, max_msgs: int = 32, timeout: float = 1.0) -> list[Message]:
        """Up to ``max_msgs`` messages from the owned queues, waiting up to ``timeout``
        (at least ANSWER_S for the answers to pulls it sent: poll(timeout=0) still
        returns what the brokers hold). What is due again from the retry topic comes
        first, up to half the batch, shown with the topic it was first sent to."""
        # (max_msgs 0 polled nothing, silently; a timeout below 0 is a deadline passed)
        if not (isinstance(max_msgs, int) and max_msgs >= 1) or timeout != timeout:
            raise ValueError(f"poll takes max_msgs >= 1 and a timeout in seconds, not "
                             f"{max_msgs!r} and {timeout!r}")
        retry = self._retry
        if retry is None:
            return self._poll(max_msgs, timeout)
        # the retry topic's turn first, without waiting: when the topic filled every batch,
        # a group behind on it got what was due again only once it had caught up (RocketMQ
        # subscribes the retry topic as one more topic, its queues served in turn)
        msgs = [as_first_sent(m) for m in retry._poll(max(1, max_msgs // 2), 0.0, answer_s=0.0)]
        if len(msgs) < max_msgs:
            msgs += self._poll(max_msgs - len(msgs), 0.0 if msgs else timeout)
        if len(msgs) < max_msgs:
            msgs += [as_first_sent(m) for m in retry._poll(max_msgs - len(msgs), 0.0)]
        return msgs

    def nack(self, message: Message, delay: str | float | None = None) -> str:
        """The handler failed `message`: send it back for this group, to come again after
        a growing delay (or `delay`, a level), or to the dead-letter queue past
        `max_reconsume` tries: "retry" or "dlq". Raises SendFailed when it could not be
        sent; its queue is then read again from it (what followed comes again too)."""
        return self.mode.nack(message, delay)

    def sender_for_nacks(self):
        """The producer that sends failed messages back (made by the first)."""
        if self._sender is None:
            from broker_core.client.producer import Producer

            self._sender = Producer(None if self.routes is not None else dict(self.brokers),
                                    routes=self.routes, timeout=self.timeout,
                                    credentials=self.credentials)
            if self.tracer is not None:  # a traced message's copies are traced (none else)
                from broker_core.client.tracing import SendTracer

                self._sender.tracer = SendTracer(self.tracer.dispatcher, 0.0, self.client_id)
        return self._sender

    def rewind(self, message: Message) -> bool:
        """Hand `message` out again, from the queue it came from (this consumer's topic or
        its retry topic); what followed it comes again too: at least once. False if
        neither handed it out since the last commit."""
        if self.pulls.rewind(message, self._owned):
            return True
        return self._retry is not None and self._retry.rewind(message)

    def consume(self, handler: Callable[[Message], object], max_msgs: int = 32,
                timeout: float = 1.0, stop=None) -> None:
        """Hand each message to `handler` until `stop` (an Event) is set; a message whose
        handler raises is sent back (`nack`); offsets ride the next pulls after each batch
        (`commit(wait=False)`), and are committed at once when it stops.
        Orderly: one queue's messages in order, a failure retried in place."""
        return self.mode.consume(handler, max_msgs, timeout, stop)

    def _poll(self, max_msgs: int, timeout: float, answer_s: float = ANSWER_S
              ) -> list[Message]:
        pulls = self.pulls
        deadline = self.clock() + timeout
        while True:
            if self.clock() >= self._next_heartbeat:
                self.heartbeat()
            else:
                self.mode.on_wake(self.clock())
            if pulls.fill(self._owned_by_broker, self._start_offset):
                deadline = max(deadline, self.clock() + answer_s)
            pulls.serve(0.0, self._owned)
            if pulls.ready:
                return self._take(max_msgs)
            now = self.clock()
            left = deadline - now
            if left <= 0:
                return []
            # asleep until an answer comes or something is due: a heartbeat, a lock to
            # try again, a pull that outstayed its hold (not every 0.1 s to look)
            due = min(self._next_heartbeat, pulls.next_due(now), self.mode.due(now))
            pulls.serve(max(0.0, min(left, due - now)), self._owned)
            if pulls.ready:
                return self._take(max_msgs)

    def _take(self, max_msgs: int) -> list[Message]:
        """Hand out what is buffered (the pulls remember each message's queue: `nack`)."""
        out: list[Message] = []
        for queue, part in self.pulls.take(max_msgs):
            out.extend(part)
            if self.tracer is not None:
                self.tracer.polled(queue[0], part)
        return out

    @property
    def corrupt(self) -> int:
        """Records that failed their CRC, skipped."""
        return self.pulls.corrupt

    def _heard_reset(self, reset: int) -> None:
        """An operator moved the group's offsets (`floodgate offsets reset`): what this
        consumer holds and where it was are dropped, and it starts again from the
        offsets the brokers have now (nothing of the old range is committed after)."""
        if reset <= self._reset:
            return
        started = bool(self.pulls.offsets or self.pulls.delivered)
        self._reset = self.pulls.reset = reset
        if not started:
            return
        self.resets_seen += 1
        self.pulls.forget([])
        self.committed.clear()
        if self.tracer is not None:
            self.tracer.release_all()

    def commit(self, wait: bool = True) -> None:
        """Store the offsets of everything polled so far on the brokers (a broadcast
        instance: in its offsets file, at most once a second). `wait=False`: they ride
        the next pull to each broker instead of a request of their own (RocketMQ's pull
        carries its commit offset too), RIDE_WAIT_S later at most."""
        self.pulls.committed()  # a message handed out before is past its nack now
        if self.mode.commit(wait):
            return
        if self._retry is not None:
            self._retry.commit(wait)
        moved: dict[str, dict[int, int]] = {}  # broker -> queue id -> offset
        for (broker, qid), offset in list(self.pulls.delivered.items()):
            if self.committed.get((broker, qid)) != offset:
                moved.setdefault(broker, {})[qid] = offset
        for broker, offsets in moved.items():  # one request a broker, its queues in it
            if not wait:
                self.pulls.ride(broker, offsets)
                continue
            self.pulls.unride(broker)
            try:
                answer = self.call_json(
                    broker,
                    Op.COMMIT_OFFSET,
                    {"group": self.group, "topic": self.topic,
                     "offsets": {str(q): o for q, o in offsets.items()}, "reset": self._reset},
                )
                if answer.get("stale"):  # reset meanwhile: start over from the new offsets
                    self._heard_reset(int(answer.get("reset", 0)))
                    return
                self._mark_committed(broker, offsets)
            except (BrokerUnavailable, BrokerError):
                pass  # at-least-once: committed again next time

    def _mark_committed(self, broker: str, offsets: dict[int, int]) -> None:
        for qid, offset in offsets.items():
            self.committed[(broker, qid)] = offset
            if self.tracer is not None:
                self.tracer.committed((broker, qid), offset)

    def close(self) -> None:
        try:
            if self._retry is not None:
                self._retry.close()
            self.commit()
            self.mode.close()
            self.heartbeat(leave=True)
        finally:
            self._pool.close()
            if self._sender is not None:
                self._sender.close()
            if self.tracer is not None:
                self.tracer.release_all()
            if self._own_trace is not None:
                self._own_trace.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
