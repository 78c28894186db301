"""Pull sessions: a wide consumer's queues kept between its pulls (Kafka's incremental
fetch sessions, KIP-227).

A consumer owning hundreds of a topic's queues here names them all once (epoch 0) and
then only what changed (`protocol.pull`). Its session keeps each queue's offset and the
queues that may have something to answer: those found behind when named, and those a
message arrived in since (`PullOps.arrived`: one lookup per session of the topic). A
pull then costs the broker what changed and what it answers. Naming every queue each
time, a consumer of 1,024 queues had the broker check all 1,024 on every pull: half its
CPU in the capacity grid's 10,240-queue cells, where each pull brings a message or two.

A pull naming many queues without a session gets one for as long as it is held (the
same bookkeeping, dropped once it is answered).

A session lives until it has not been used for IDLE_S (a consumer pulls every 15 s at
least) or until MAX_SESSIONS are kept or they name MAX_QUEUES queues, the least recently
used going first; sessions are swept when one opens (no timer). A consumer whose session is gone (swept, the broker
restarted, a pull of its lost on the way: an epoch out of step) is answered
PULL_SESSION_GONE and names every queue again.
"""

from __future__ import annotations

from collections.abc import Callable

from broker_core import protocol as p

IDLE_S = 120.0  # a session not used for this long is dropped (8 of a consumer's long polls)
MAX_SESSIONS = 4096  # kept at most: the least recently used goes first
MAX_QUEUES = 1 << 20  # queues named by the kept sessions at most (~100 MiB of offsets)


class PullSession:
    """One consumer's queues of a topic here: where it reads each, which may have
    something to answer, and the pull it has held (at most one)."""

    __slots__ = ("sid", "group", "topic", "offsets", "behind", "epoch", "held", "used",
                 "turn", "kept")

    def __init__(self, sid: int, req: p.PullRequest, now: float, kept: bool) -> None:
        self.sid, self.group, self.topic = sid, req.group, req.topic
        self.offsets: dict[int, int] = dict(req.queues)  # queue id -> offset to read from
        self.behind: set[int] = set()  # queues that may have something past their offset
        self.epoch = req.epoch
        self.held = None  # its pull waiting for a message (pull_ops.HeldPull)
        self.used = now
        self.turn = 0  # rotates which behind queue is read first
        self.kept = kept  # False: a sessionless pull's, dropped once answered


class PullSessions:
    """The broker's sessions. `queue(topic, qid)` is the ConsumeQueue (None: never
    written); `clock` the pull ops' clock."""

    def __init__(self, queue: Callable, clock: Callable[[], float]) -> None:
        self.lookup = queue  # (topic, queue id) -> its ConsumeQueue, None: never written
        self._clock = clock
        self._by_id: dict[int, PullSession] = {}  # in the order of their last use
        self.by_topic: dict[str, set[PullSession]] = {}  # kept or held: told of arrivals

    def __len__(self) -> int:
        return len(self._by_id)

    @property
    def queues(self) -> int:
        """Queues the kept sessions name (what they hold in memory)."""
        return sum(len(s.offsets) for s in self._by_id.values())

    def open(self, req: p.PullRequest, kept: bool = True) -> PullSession:
        """A session for every queue `req` names (epoch 0 of `req.session`, or a
        sessionless pull's for as long as it is held), replacing one of the same id."""
        now = self._clock()
        if kept:
            self._sweep(now, len(req.queues))
            old = self._by_id.pop(req.session, None)
            if old is not None:
                self.close(old)
        s = PullSession(req.session, req, now, kept)
        if kept:
            self._by_id[s.sid] = s
        self.by_topic.setdefault(s.topic, set()).add(s)
        self.recheck(s)
        return s

    def get(self, sid: int) -> PullSession | None:
        return self._by_id.get(sid)

    def follow(self, req: p.PullRequest) -> PullSession | None:
        """The session `req` (epoch n > 0) follows, with its changes applied; None when
        there is none for it (gone, another group's or topic's, or the epoch out of step:
        then it is closed, its held pull already answered by the caller)."""
        s = self._by_id.get(req.session)
        if s is None or s.epoch + 1 != req.epoch or s.group != req.group or \
                s.topic != req.topic:
            if s is not None:
                self.close(s)
            return None
        del self._by_id[s.sid]  # last used now: to the end of the order
        self._by_id[s.sid] = s
        s.epoch, s.used = req.epoch, self._clock()
        offsets, behind = s.offsets, s.behind
        for qid, offset in req.queues:
            if offset == p.QUEUE_GONE:
                offsets.pop(qid, None)
                behind.discard(qid)
            else:
                offsets[qid] = offset
                behind.add(qid)  # checked by `waiting`
        return s

    def close(self, s: PullSession) -> None:
        if self._by_id.get(s.sid) is s:
            del self._by_id[s.sid]
        sessions = self.by_topic.get(s.topic)
        if sessions is not None:
            sessions.discard(s)
            if not sessions:
                del self.by_topic[s.topic]

    def drop_all(self) -> None:
        """Every session forgotten (the broker shutting down, as a restart forgets them):
        their consumers name every queue again."""
        self._by_id.clear()
        self.by_topic.clear()

    def _sweep(self, now: float, adding: int) -> None:
        """Drop sessions idle for IDLE_S, and the least recently used while there is no
        room for one more of `adding` queues."""
        queues = self.queues
        for s in list(self._by_id.values()):  # oldest use first
            if now - s.used < IDLE_S and len(self._by_id) < MAX_SESSIONS and \
                    queues + adding <= MAX_QUEUES:
                break
            if s.held is None:
                queues -= len(s.offsets)
                self.close(s)

    def recheck(self, s: PullSession) -> None:
        """Every queue checked again (a session opening, a held pull's timeout: what moved
        without an arrival, retention passing an offset, is found then)."""
        s.behind = {qid for qid, offset in s.offsets.items()
                    if self._behind(s.topic, qid, offset)}

    def _behind(self, topic: str, qid: int, offset: int) -> bool:
        cq = self.lookup(topic, qid)
        if cq is None:
            return offset != 0  # past a queue never written: answered OFFSET_OVERFLOW
        return offset != cq.max_offset or cq.min_offset > offset

    def waiting(self, s: PullSession) -> int:
        """Messages the session's behind queues hold past its offsets; those found caught
        up leave the behind set."""
        topic, offsets, count = s.topic, s.offsets, 0
        for qid in list(s.behind):
            offset = offsets[qid]
            cq = self.lookup(topic, qid)
            if cq is None:
                if not offset:
                    s.behind.discard(qid)
            elif offset == cq.max_offset and cq.min_offset <= offset:
                s.behind.discard(qid)
            else:
                count += max(0, cq.max_offset - offset)
        return count

    def reads(self, s: PullSession) -> list[tuple[int, int]]:
        """The queues to read for an answer: a kept session's behind queues from a turning
        start (none always last when an answer fills), a sessionless pull's in its order."""
        offsets = s.offsets
        if not s.kept:
            return [(qid, offset) for qid, offset in offsets.items() if qid in s.behind]
        qids = sorted(s.behind)
        if qids:
            k = s.turn % len(qids)
            s.turn += 1
            qids = qids[k:] + qids[:k]
        return [(qid, offsets[qid]) for qid in qids]
