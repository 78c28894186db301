"""PULL: answered from the stored records, held while its queues are empty (long polling).

A pull names any number of a topic's queues (a consumer's share on this broker). The
answer is each queue's state and the records' bytes as the CommitLog holds them,
written with one gather write (RocketMQ serves pulls from the mapped CommitLog
without decoding them; the consumer verifies each record's CRC). A pull whose
queues are all caught up is held until a message arrives in one of them or its
timeout passes.

Answers are batched, as Kafka's fetch.min.bytes and fetch.max.wait do: a pull
that would bring fewer than MIN_BATCH messages waits up to `hold_s` for more,
and arrivals wake held pulls through one timer of `hold_s` that answers every
pull woken meanwhile. On this kind of host a round trip's two system calls cost
more than the Python that serves a message, so a consumer at the head of a
paced stream gets a message every `hold_s` in bursts, not one pull per message.
The hold only pays where it batches: a pull that had waited `hold_s` or more
before its first arrival is on a stream sparser than a message a hold (a consumer
of a hundred queues among ten thousand gets one every ~50 ms), where holding
would bring no second message, only delay. Such a pull is answered at the loop's
next turn (with every other pull woken in the same turn), as RocketMQ's and
Kafka's defaults answer a long poll on arrival.
Timeouts are swept by one timer armed for the earliest held pull's (no timer per held
pull, and none at all while nothing is held).

A pull naming more than NARROW queues is held per topic, through a pull session
(`pull_sessions`): the consumer's own, kept between its pulls, or one for as long as
the pull is held. The session knows which queues have something to answer (those behind
when named and those a message arrived in since), and an answer reads just those; one
answered at its timeout checks every queue again (what moved without an arrival,
retention passing an offset, is answered then).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from time import perf_counter
from typing import Protocol

from broker_core import protocol as p
from broker_core.deadline import Deadline
from broker_core.errors import BrokerError
from broker_core.observe.recorder import OpRecorder
from broker_core.protocol import Code, Op
from broker_core.server.cold_reads import ColdReads
from broker_core.server.config import BrokerConfig
from broker_core.server.faults import Faults
from broker_core.server.pull_sessions import PullSession, PullSessions
from broker_core.server.topic_table import TopicTable
from broker_core.store import GetStatus, MessageStore

log = logging.getLogger("floodgate.broker")

HOLD_S = 0.001  # arrivals answer held pulls in batches this far apart
MIN_BATCH = 16  # a pull that would bring fewer waits up to HOLD_S for more
SWEEP_S = 0.005  # held pulls due within this of the one swept are answered with it
NARROW = 16  # a pull naming more queues is held per topic, not per queue
_STATUS = {
    GetStatus.FOUND: "FOUND",
    GetStatus.NO_NEW_MSG: "NO_NEW_MSG",
    GetStatus.OFFSET_OVERFLOW: "OFFSET_OVERFLOW",
    GetStatus.OFFSET_TOO_SMALL: "OFFSET_TOO_SMALL",
    GetStatus.NO_MATCHED_MESSAGE: "NO_MATCHED_MSG",
}

Reply = Callable[[list[bytes]], None]


class HeldPull:
    """A pull waiting for one of its queues."""

    __slots__ = ("rid", "req", "reply", "received", "since", "deadline", "due", "done",
                 "session")

    def __init__(self, rid: int, req: p.PullRequest, reply: Reply, received: float,
                 since: float, deadline: float) -> None:
        self.rid, self.req, self.reply, self.received = rid, req, reply, received
        self.since, self.deadline = since, deadline  # held at, timed out at (the ops' clock)
        self.due = self.done = False
        self.session: PullSession | None = None  # a wide pull's (held per topic)


class PullContext(Protocol):
    """What the pull ops need of their broker (server.broker.Broker is one)."""

    config: BrokerConfig
    store: MessageStore
    topics: TopicTable
    faults: Faults
    recorder: OpRecorder

    def bad(self, message: str) -> tuple[int, bytes]: ...
    def committed(self, group: str, topic: str, offsets: list[tuple[int, int]],
                  reset: int) -> bool: ...


class PullOps:
    def __init__(self, broker: PullContext, hold_s: float = HOLD_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.broker = broker
        self.hold_s = hold_s
        self._clock = clock
        self._held: dict[tuple[str, int], list[HeldPull]] = {}  # queue -> pulls waiting on it
        # topic -> events set when a message arrives in any of its queues (a RocketMQ
        # client's long-polling receive: broker_core.grpc_front)
        self.waiters: dict[str, set] = {}
        # pulls naming more than NARROW queues (a consumer's share of a topic with many),
        # and consumers' sessions: held per topic, so holding and answering one costs
        # what it answers whatever its width
        self.sessions = PullSessions(
            lambda topic, qid: broker.store.queue_table.queues.get((topic, qid)), clock)
        self.cold = ColdReads(broker.store)  # answers read from the disk off the loop
        self._waiting: set[HeldPull] = set()
        self._due: list[HeldPull] = []
        self._batch: asyncio.TimerHandle | None = None
        self._soon: list[HeldPull] = []  # woken after a quiet wait: answered next turn
        self._soon_armed = False
        self._sweeper = Deadline(self._expire, "held pulls' timeouts")

    @property
    def held(self) -> int:
        return len(self._waiting)

    def figures(self) -> dict:
        """/stats' `pulls`: held now, sessions kept and the queues they name."""
        return {"held": len(self._waiting), "sessions": len(self.sessions),
                "session_queues": self.sessions.queues}

    def pull(self, rid: int, body: bytes, received: float, reply: Reply) -> list[bytes] | None:
        """The answer's parts (one gather write), or None: held, answered through `reply`."""
        b = self.broker
        try:
            req = p.decode_pull(body)
        except p.ProtocolError as exc:
            return [p.encode_answer(Op.PULL, rid, *b.bad(str(exc)))]
        if req.commit:  # the group's offsets ride the pull (COMMIT_OFFSET's; a reset the
            try:        # consumer has not heard of it hears with its next heartbeat)
                b.committed(req.group, req.topic, req.commit, req.reset)
            except (p.ProtocolError, ValueError) as exc:
                return [p.encode_answer(Op.PULL, rid, *b.bad(str(exc)))]
        session = None
        if req.session:  # applied whatever the answer: the consumer counts on it
            old = self.sessions.get(req.session)
            if old is not None and old.held is not None:
                self._finish(old.held)  # a pull the consumer gave up on (it sent this one)
            if req.incremental:
                session = self.sessions.follow(req)
                if session is None:
                    return [p.encode_answer(Op.PULL, rid, Code.PULL_SESSION_GONE,
                                            b"no such pull session here: name every queue")]
            else:
                session = self.sessions.open(req)
        if b.faults.pause_left():  # a drill's pause holds every request
            asyncio.ensure_future(self._after_pause(rid, req, received, reply, session))
            return None
        if b.topics.get(req.topic, create=False) is None:
            return [p.encode_answer(Op.PULL, rid, Code.TOPIC_NOT_EXIST,
                                    f"topic {req.topic!r} does not exist".encode())]
        if (refusal := b.topics.read_refusal(req.topic, b.config.name)) is not None:
            return [p.encode_answer(Op.PULL, rid, Code.NO_PERMISSION, refusal.encode())]
        if session is None and req.timeout_ms and len(req.queues) > NARROW:
            session = self.sessions.open(req, kept=False)
        if req.timeout_ms:
            if session is not None:
                waiting = self.sessions.waiting(session)
            else:
                waiting = self._available(req)
            if waiting < min(MIN_BATCH, req.max_msgs):
                now = self._clock()
                held = HeldPull(rid, req, reply, received, now, now + req.timeout_ms / 1000)
                held.session = session
                self._hold(held)
                if waiting:  # some are there: they go with the next batch
                    self._make_due(held)
                return None
        reads = self.sessions.reads(session) if session is not None else req.queues
        ranges = self.cold.ranges(req.topic, reads, req.max_msgs)
        if ranges:  # far behind the head: its pages read in a worker first
            asyncio.ensure_future(self._answer_cold(rid, req, received, reply, session, reads,
                                                    ranges))
            return None
        if session is not None:
            return self._answer_session(rid, req, received, session, reads=reads)
        return self.answer(rid, req, received, wide=len(req.queues) > NARROW)

    async def _answer_cold(self, rid, req, received, reply, session, reads, ranges) -> None:
        try:
            await self.cold.warm(ranges)
        except (OSError, RuntimeError) as exc:  # (the pool shut down: the broker closing)
            log.debug("cold read ahead of a pull failed: %s", exc)
        if session is not None:
            reply(self._answer_session(rid, req, received, session, reads=reads))
        else:
            reply(self.answer(rid, req, received, wide=len(req.queues) > NARROW))

    async def _after_pause(self, rid, req, received, reply, session) -> None:
        await asyncio.sleep(self.broker.faults.pause_left())
        if session is not None:
            reply(self._answer_session(rid, req, received, session, every_queue=True))
        else:
            reply(self.answer(rid, req, received, wide=len(req.queues) > NARROW))

    def _answer_session(self, rid: int, req: p.PullRequest, received: float,
                        session: PullSession, every_queue: bool = False,
                        reads: list[tuple[int, int]] | None = None) -> list[bytes]:
        sessions = self.sessions
        if every_queue:
            sessions.recheck(session)
        if reads is None:
            reads = sessions.reads(session)
        answer = self.answer(rid, req, received, reads, wide=True)
        if not session.kept:
            sessions.close(session)
        return answer

    def _available(self, req: p.PullRequest) -> int:
        """Messages the pull's queues hold past its offsets (without reading them)."""
        offsets = self.broker.store.queue_offsets
        topic = req.topic
        return sum(max(0, offsets(topic, qid)[1] - offset) for qid, offset in req.queues)

    def answer(self, rid: int, req: p.PullRequest, received: float,
               queues: list[tuple[int, int]] | None = None, wide: bool = False) -> list[bytes]:
        """The answer to `req`, reading `queues` (a session's) or every queue it names;
        a wide answer names only the queues it read."""
        b = self.broker
        left = req.max_msgs
        states, records = [], []
        offsets = b.store.queue_offsets
        try:
            for qid, offset in req.queues if queues is None else queues:
                if left <= 0:
                    if not wide:
                        states.append((qid, "NOT_READ", offset, 0, 0, 0))
                    continue
                lo, hi = offsets(req.topic, qid)
                if offset == hi and lo <= offset:  # caught up: most queues of a wide pull
                    if not wide:  # a wide pull's answer names only the queues it reads
                        states.append((qid, "NO_NEW_MSG", offset, lo, hi, 0))
                    continue
                got = b.store.get_records(req.topic, qid, offset, left, req.tag or None)
                msgs = got.messages
                states.append((qid, _STATUS[got.status], got.next_offset, got.min_offset,
                               got.max_offset, len(msgs)))
                if msgs:
                    records.extend(msgs)
                    left -= len(msgs)
        except BrokerError as exc:  # the store closing under a held pull
            return [p.encode_answer(Op.PULL, rid, Code.SYSTEM_ERROR, str(exc).encode())]
        head = p.encode_pull_head(states)
        size = len(head) + sum(len(r) for r in records)
        frame = p.HEADER.pack(p.HEADER_SIZE - p.LENGTH_SIZE + size, p.MAGIC, p.VERSION, Op.PULL,
                              p.FLAG_RESPONSE, 0, Code.OK if records else Code.PULL_NOT_FOUND,
                              rid) + head
        if records:
            b.recorder.record("pull", perf_counter() - received, len(records), size - len(head))
        return [frame, *records]

    # -- holding ------------------------------------------------------------------------
    def _hold(self, held: HeldPull) -> None:
        topic = held.req.topic
        if held.session is not None:
            held.session.held = held
        else:
            for qid, _offset in held.req.queues:
                self._held.setdefault((topic, qid), []).append(held)
        self._waiting.add(held)
        self._sweeper.after(held.deadline - self._clock())

    def arrived(self, topic: str, queue_id: int) -> None:
        """A message was stored in the queue: its held pulls are answered with the next
        batch (armed now if none is). A sync master's gate holds it from readers until
        the in-sync slaves ack it (store.confirm_gate): then `readable` is called."""
        gate = self.broker.store.gate
        if gate is None or not gate.active:
            self.readable(topic, queue_id)

    def readable(self, topic: str, queue_id: int) -> None:
        """Readers may take more of the queue: its held pulls wake."""
        held = self._held.get((topic, queue_id))
        if held:
            for h in held:
                if not h.due:
                    self._make_due(h)
        events = self.waiters.get(topic)
        if events:
            for event in events:
                event.set()
        sessions = self.sessions.by_topic.get(topic)
        if sessions:
            for s in sessions:
                if queue_id in s.offsets:
                    s.behind.add(queue_id)
                    h = s.held
                    if h is not None and not h.due:
                        self._make_due(h)

    def _make_due(self, held: HeldPull) -> None:
        held.due = True
        if self._clock() - held.since >= self.hold_s:  # a sparse stream: no batch to wait for
            self._soon.append(held)
            if not self._soon_armed:
                self._soon_armed = True
                asyncio.get_running_loop().call_soon(self._answer_soon)
            return
        self._due.append(held)
        if self._batch is None:
            self._batch = asyncio.get_running_loop().call_later(self.hold_s, self._answer_due)

    def _answer_due(self) -> None:
        self._batch = None
        due, self._due = self._due, []
        for held in due:
            self._finish(held)

    def _answer_soon(self) -> None:
        self._soon_armed = False
        soon, self._soon = self._soon, []
        for held in soon:
            self._finish(held)

    def _expire(self) -> float | None:
        """Answer the held pulls past their timeout; in how long the next one is due."""
        now = self._clock()
        for held in [h for h in self._waiting if h.deadline <= now + SWEEP_S]:
            self._finish(held, every_queue=True)
        return min((h.deadline for h in self._waiting), default=now) - now \
            if self._waiting else None

    def _finish(self, held: HeldPull, every_queue: bool = False) -> None:
        if held.done:
            return
        held.done = True
        self._waiting.discard(held)
        topic = held.req.topic
        if held.session is not None:
            held.session.held = None
            held.reply(self._answer_session(held.rid, held.req, held.received, held.session,
                                            every_queue))
            return
        for qid, _offset in held.req.queues:
            waiting = self._held.get((topic, qid))
            if waiting is not None:
                waiting.remove(held)
                if not waiting:
                    del self._held[(topic, qid)]
        held.reply(self.answer(held.rid, held.req, held.received))

    def answer_all(self) -> None:
        """Shutting down: every held pull answered now (with what there is)."""
        for held in list(self._waiting):
            self._finish(held, every_queue=True)
        self.sessions.drop_all()
        self.cold.close()
