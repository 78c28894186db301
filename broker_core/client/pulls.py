"""A consumer's pull pipeline: what it has fetched ahead of `poll` (client.consumer).

Pulls are pipelined, as RocketMQ's push consumer keeps pulls outstanding: each
broker has one long-poll PULL in flight for all the queues the consumer owns
there (the broker holds it until messages arrive in one of them), answers are
read by the thread that polls (no reader thread), and what they bring waits in
a buffer (at most BUFFER_PER_QUEUE a queue before it is pulled again) until
`poll` hands it out. A pull's records are verified here (CRC), as the broker
serves them as stored.

Per queue two offsets: `offsets`, the next one to pull (ahead of what was handed
out by what is buffered), and `delivered`, past the last message handed out (what
a commit stores). Dropping the buffer (a rebalance, a rewind) pulls again from
`delivered`.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future

from broker_core.client.connection import BrokerUnavailable
from broker_core.client.pool import ConnectionPool, serve_any
from broker_core.client.pull_session import SESSION_QUEUES, SessionView
from broker_core.errors import BrokerError
from broker_core.protocol import (
    MAX_PULL_MSGS,
    Code,
    Op,
    ProtocolError,
    PullRequest,
    QueueState,
    decode_pull_head,
    encode_pull,
)
from broker_core.protocol.record import CorruptRecord, Message
from broker_core.protocol.record_batch import decode_records

log = logging.getLogger("floodgate.consumer")

# How long a broker holds a pull on a caught-up queue (RocketMQ's 15 s): an idle
# consumer sends a pull a broker this often. A broker's holding costs nothing (its
# timeouts wait on one deadline), and a message that arrives answers at once.
PULL_WAIT_MS = 15_000
PULL_BATCH = 32  # messages a pull asks for, per queue it names (RocketMQ's pullBatchSize)
RIDE_WAIT_S = 1.0  # a commit waits this long at most for a pull to ride (then one is sent)
BUFFER_PER_QUEUE = 256  # messages fetched and not yet handed out, before a queue's next pull
DOWN_S = 1.0  # a broker that failed a pull is not asked again for this long (its slave is),
DOWN_MAX_S = 16.0  # doubling with each failure in a row up to this: one that cannot be
# reached (a partition) would otherwise cost a whole timeout every second

Queue = tuple[str, int]  # (broker or group, queue id)


def read_pull_answer(body: bytes) -> list[tuple[QueueState, list[Message], int]]:
    """A PULL answer, per queue it names: (its state, its messages verified and decoded,
    corrupt records skipped). ProtocolError or CorruptRecord when it cannot be read."""
    states, pos = decode_pull_head(body)
    out = []
    for state in states:
        msgs, corrupt, pos = decode_records(body, pos, state.count)
        out.append((state, msgs, corrupt))
    if pos != len(body):
        raise ProtocolError(f"{len(body) - pos} unexpected bytes after a pull's records")
    return out


class DownList:
    """Addresses not asked for a while: DOWN_S after a failure, doubling with each
    failure in a row up to DOWN_MAX_S."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._until: dict[str, float] = {}  # address -> not asked until then
        self._fails: dict[str, int] = {}  # address -> failures in a row

    def failed(self, addr: str) -> None:
        n = self._fails[addr] = self._fails.get(addr, 0) + 1
        self._until[addr] = self._clock() + min(DOWN_MAX_S, DOWN_S * 2 ** (n - 1))

    def hold(self, addr: str, seconds: float = DOWN_S) -> None:
        """Not asked for `seconds`: it answered, with nothing this consumer can use."""
        self._until[addr] = self._clock() + seconds

    def answered(self, addr: str) -> None:
        self._fails.pop(addr, None)

    def up(self, addr: str, now: float) -> bool:
        return self._until.get(addr, 0.0) <= now

    def next_up(self, now: float) -> float:
        """When the next address not asked now may be again (inf: none is down)."""
        return min((t for t in self._until.values() if t > now), default=math.inf)


class Pulls:
    """`pool` holds a connection per address; `routes` (None: the names are the brokers'
    addresses) gives a group's replicas, the master first; `pullable(queue)` says whether
    a queue is read now (an orderly consumer's lock, a pause after a failure)."""

    def __init__(self, group: str, topic: str, pool: ConnectionPool, routes, down: DownList,
                 timeout: float, clock: Callable[[], float],
                 pullable: Callable[[Queue], bool]) -> None:
        self.group, self.topic = group, topic
        self._pool, self._routes, self._down = pool, routes, down
        self._timeout, self._clock, self._pullable = timeout, clock, pullable
        self.offsets: dict[Queue, int] = {}  # next offset to pull
        self.delivered: dict[Queue, int] = {}  # past the last one handed out
        self.corrupt = 0  # records that failed their CRC, skipped
        # broker -> its pull: (address, answer, sent at, the offsets it commits or None)
        self._inflight: dict[str, tuple[str, Future, float, dict | None]] = {}
        self._sessions: dict[str, SessionView] = {}  # broker -> its pull session
        # broker -> queue id -> offset: the group's commit, to ride the next pull there
        self._ride: dict[str, dict[int, int]] = {}
        self.reset = 0  # the last operator's reset the consumer heard of (its commits say)
        # told (broker, {queue id: offset}) once a pull that carried them was answered
        self.on_committed: Callable[[str, dict[int, int]], None] | None = None
        self._rewound: set[Queue] = set()  # cleared since last pulled: pulled again first
        self._turn = 0
        # per queue, its fetched runs (messages, the offset past them) oldest first; the
        # queues in the order of their turns (a dict keeps it: a served queue goes last)
        self._ready: dict[Queue, deque[tuple[list[Message], int]]] = {}
        self._buffered: dict[Queue, int] = {}
        # each message handed out since the last commit, by (store host, queue id,
        # physical offset) -> its queue: a message whose send-back failed is read again
        self._handed_out: dict[tuple[bytes, int, int], Queue] = {}
        # read from a follower (a slave) when one is up, the n-th of them (consumers of a
        # group spread over them); None: from the master. Commits then go to the master
        self.read_followers: int | None = None
        self.leader_commits = None  # client.leader_commits.LeaderCommits, when they do

    @property
    def ready(self) -> bool:
        return bool(self._ready)

    def fill(self, owned_by_broker: dict[str, list[Queue]],
             start_offset: Callable[[Queue], int]) -> bool:
        """A pull in flight on every broker where an owned queue has room in the buffer
        (`start_offset` for a queue not read before); whether any was sent."""
        sent = False
        rewound = self._rewound
        for broker, owned in owned_by_broker.items():
            if broker in self._inflight:  # (checked first: a poll's loop asks often)
                if not self._ask_again(broker, owned, rewound):
                    continue
                addr, fut, _sent, _commit = self._inflight.pop(broker)
                self._pool.get(addr).forget(fut)
            queues = [q for q in owned
                      if self._buffered.get(q, 0) < BUFFER_PER_QUEUE and self._pullable(q)]
            if not queues:
                continue
            rewound.difference_update(queues)
            addr = self._pull_addr(broker)
            if addr is None:
                continue
            try:
                for queue in queues:
                    if queue not in self.offsets:
                        self.offsets[queue] = start_offset(queue)
                commit = self._ride.pop(broker, None)
                if commit and self.leader_commits and addr != self._routes.master(broker):
                    self.leader_commits.send(broker, commit, self.reset)  # (a follower's
                    commit = None  # offsets are its leader's copy, replaced when adopted)
                req = PullRequest(self.group, self.topic, [],
                                  min(MAX_PULL_MSGS, PULL_BATCH * len(queues)), PULL_WAIT_MS,
                                  commit=sorted(commit.items()) if commit else [],
                                  reset=self.reset)
                self._name_queues(req, broker, addr, queues)
                fut = self._pool.get(addr).request(Op.PULL, encode_pull(req), watched=True)
            except (BrokerUnavailable, BrokerError):
                self._down.failed(addr)
                self._sessions.pop(broker, None)
                continue
            self._inflight[broker] = (addr, fut, self._clock(), commit)
            sent = True
        return sent

    def _name_queues(self, req: PullRequest, broker: str, addr: str,
                     queues: list[Queue]) -> None:
        """The queues `req` names: through the broker's pull session (what changed) when
        there are many or one is open, else all of them, rotated (none always last when
        an answer fills; a session's broker rotates them)."""
        offsets = self.offsets
        view = self._sessions.get(broker)
        if view is None and len(queues) <= SESSION_QUEUES:
            turn = self._turn = self._turn + 1
            k = turn % len(queues)
            req.queues = [(q, offsets[(broker, q)]) for _b, q in queues[k:] + queues[:k]]
            return
        want = {q: offsets[(broker, q)] for _b, q in queues}
        if view is None or view.addr != addr:
            view = self._sessions[broker] = SessionView(addr, want)
            req.queues = list(want.items())
        else:
            req.queues = view.next(want)
        req.session, req.epoch = view.sid, view.epoch

    def _pull_addr(self, broker: str) -> str | None:
        """Where a queue of `broker` is pulled from: the broker, or with routes its
        group's master, or a slave while the master fails pulls (reading from followers:
        a follower, or the master while none answers)."""
        if self._routes is None:
            return broker
        now = self._clock()
        replicas = self._routes.replicas(broker)  # the master first, then its slaves
        if self.read_followers is not None and len(replicas) > 1:
            k = self.read_followers % (len(replicas) - 1)
            replicas = replicas[1 + k:] + replicas[1:1 + k] + replicas[:1]
        for addr in replicas:
            self._pool.addrs.setdefault(addr, addr)
            if self._down.up(addr, now):
                return addr
        return None

    def next_due(self, now: float) -> float:
        """When `poll` must look again without an answer: a pull given up on, or a
        broker that failed back up (inf: nothing is due)."""
        due = min((sent + self._timeout + PULL_WAIT_MS / 1000
                   for _a, _f, sent, _c in self._inflight.values()), default=math.inf)
        for broker in self._ride:  # a commit waiting behind a held pull: RIDE_WAIT_S at most
            if broker in self._inflight:
                due = min(due, self._inflight[broker][2] + RIDE_WAIT_S)
        return min(due, self._down.next_up(now))

    def serve(self, timeout: float, owned: Iterable[Queue]) -> None:
        """Read the answers that arrive within `timeout`, and take in those of `owned`."""
        if self._inflight:
            serve_any([self._pool.get(a) for a, _f, _t, _c in self._inflight.values()],
                      timeout)
            self._collect(owned)
        elif timeout:
            time.sleep(timeout)

    def _collect(self, owned: Iterable[Queue]) -> None:
        """Take in the answers that arrived (and drop pulls that never will)."""
        if self.leader_commits is not None:
            self.leader_commits.collect()
        now = self._clock()
        for broker, (addr, fut, sent, commit) in list(self._inflight.items()):
            if not fut.done():
                if now - sent > self._timeout + PULL_WAIT_MS / 1000:
                    self._pool.get(addr).forget(fut)
                    del self._inflight[broker]
                    self._down.failed(addr)
                    self._sessions.pop(broker, None)
                continue
            del self._inflight[broker]
            if self._answered(broker, addr, fut, owned) and commit and self.on_committed:
                self.on_committed(broker, commit)

    def _answered(self, broker: str, addr: str, fut: Future, owned: Iterable[Queue]) -> bool:
        """Take in an answer; whether the broker took the pull (and what it committed)."""
        try:
            code, body = fut.result()
        except BrokerUnavailable:
            self._down.failed(addr)
            self._sessions.pop(broker, None)
            return False
        self._down.answered(addr)
        if code not in (Code.OK, Code.PULL_NOT_FOUND):  # (not applied, or the session
            self._sessions.pop(broker, None)             # gone: every queue named again)
            if code == Code.PULL_SESSION_GONE:
                return True  # (its commit was stored before)
        if code == Code.NO_PERMISSION:  # the topic not readable there: not asked for a while
            self._down.hold(addr)
            return False
        if code not in (Code.OK, Code.PULL_NOT_FOUND):
            return code not in (Code.BAD_REQUEST, Code.SYSTEM_ERROR)  # (a topic not there
        try:                                                  # yet: asked again next time)
            queues = read_pull_answer(body)
        except (ProtocolError, CorruptRecord) as exc:
            log.warning("%s: bad pull answer for %s: %s", addr, self.topic, exc)
            self._down.hold(addr)
            return True
        owned = set(owned)
        for state, msgs, corrupt in queues:
            queue = (broker, state.queue_id)
            if queue not in owned or state.status == "NOT_READ" or not self._pullable(queue):
                continue  # rebalanced away meanwhile, or not read this time
            if corrupt:
                self.corrupt += corrupt
                log.warning("%s: %d records of %s queue %d failed their CRC: skipped", addr,
                            corrupt, self.topic, state.queue_id)
            next_offset = state.next_offset
            if state.status == "OFFSET_TOO_SMALL":  # retention removed them: the oldest kept
                next_offset = max(next_offset, state.min_offset)
            self.offsets[queue] = next_offset
            if msgs:
                self._ready.setdefault(queue, deque()).append((msgs, next_offset))
                self._buffered[queue] = self._buffered.get(queue, 0) + len(msgs)
            elif not self._buffered.get(queue):
                self.delivered[queue] = next_offset  # nothing in between: skipped ahead
        return True

    def ride(self, broker: str, offsets: dict[int, int]) -> None:
        """Commit `offsets` (queue id -> offset) with the next pull to `broker`."""
        self._ride.setdefault(broker, {}).update(offsets)

    def unride(self, broker: str) -> None:
        """Committed otherwise (COMMIT_OFFSET): nothing older rides a pull after it."""
        self._ride.pop(broker, None)

    def _ask_again(self, broker: str, owned: list[Queue], rewound: set[Queue]) -> bool:
        """Whether the pull `broker` holds is given up and asked again now: a queue was
        rewound meanwhile (an in-place retry's pause is over), or a commit has waited
        behind it for RIDE_WAIT_S (not the held pull's whole timeout)."""
        if rewound and any(q in rewound and self._pullable(q) for q in owned):
            return True
        return broker in self._ride and \
            self._clock() - self._inflight[broker][2] >= RIDE_WAIT_S

    def take(self, max_msgs: int) -> list[tuple[Queue, list[Message]]]:
        """Up to `max_msgs` buffered messages, in runs of one queue each: the queues take
        turns, each its oldest run (Kafka's fairness across partitions, KIP-41). Oldest
        first across queues, a consumer slower than its producers handed a queue whose
        traffic had just started only after the hundreds fetched ahead for the others:
        seconds in which the broker saw that queue still and called the group STALLED."""
        out: list[tuple[Queue, list[Message]]] = []
        room = max_msgs
        while self._ready and room > 0:
            queue = next(iter(self._ready))
            if not self._pullable(queue):  # its lock lapsed, or it waits after a failure
                self.clear(queue)
                if queue in self.delivered:
                    self.offsets[queue] = self.delivered[queue]
                continue
            runs = self._ready.pop(queue)
            msgs, next_offset = runs[0]
            part, rest = msgs[:room], msgs[room:]
            out.append((queue, part))
            for m in part:
                self._handed_out[(m.store_host_raw, m.queue_id, m.physical_offset)] = queue
            room -= len(part)
            self._buffered[queue] -= len(part)
            if rest:
                runs[0] = (rest, next_offset)
                self.delivered[queue] = rest[0].queue_offset
            else:
                runs.popleft()
                self.delivered[queue] = next_offset
            if runs:
                self._ready[queue] = runs  # last in turn
        return out

    def queue_of(self, message: Message) -> Queue | None:
        """The queue `message` was handed out from since the last commit, if it was."""
        return self._handed_out.get(
            (message.store_host_raw, message.queue_id, message.physical_offset))

    def rewind(self, message: Message, keep: Iterable[Queue]) -> bool:
        """Hand `message` out again: its queue goes back to it (what followed it comes
        again too: at least once), and what was fetched ahead is dropped (the queues in
        `keep` pulled again). False if it was not handed out since the last commit."""
        queue = self.queue_of(message)
        if queue is None:
            return False
        if queue in self.delivered:
            self.delivered[queue] = min(self.delivered[queue], message.queue_offset)
        self.forget(keep)
        return True

    def committed(self) -> None:
        """What was handed out before is past rewinding (a commit covers it)."""
        self._handed_out.clear()

    def clear(self, queue: Queue) -> None:
        """Drop what was fetched for `queue` and not handed out, and the pull in flight
        to its broker (its answer could bring the queue's messages from before)."""
        self._ready.pop(queue, None)
        self._buffered.pop(queue, None)
        self._rewound.add(queue)
        inflight = self._inflight.pop(queue[0], None)
        if inflight is not None:
            self._pool.get(inflight[0]).forget(inflight[1])

    def forget(self, keep: Iterable[Queue]) -> None:
        """Drop everything fetched and not handed out, and every pull in flight; the
        queues in `keep` are pulled again from past the last message handed out."""
        self._ready.clear()
        for addr, fut, _sent, _commit in self._inflight.values():
            self._pool.get(addr).forget(fut)
        self._inflight.clear()
        self._buffered.clear()
        self.offsets = {q: self.delivered[q] for q in keep if q in self.delivered}
        self.delivered = dict(self.offsets)

    def drop(self, queue: Queue) -> None:
        """Forget where `queue` was: it starts again from its committed offset."""
        self.clear(queue)
        self.offsets.pop(queue, None)
        self.delivered.pop(queue, None)
