"""RaftGroup: a broker's part in a group that agrees by itself (Raft on the CommitLog),
with no controller and no ZooKeeper.

It stands where a master/slave broker's `ha.node.HaNode` stands (`broker.ha`, the
write path's `replication`): the broker asks it the role (the leader is MASTER, a
follower SLAVE, a candidate NONE), why a send is refused (NOT_MASTER, naming the
leader it knows), and parks each send's answer until the entry holding it is
committed. It drives the pure core (raft.node) on the broker's loop: messages from
the transport (raft.transport), one timer at the core's next deadline, proposals
from the put path (raft.appender); committed entries are published to the
ConsumeQueues (raft.commitlog_storage), waking the pulls held on them.

A send parked when its leader is deposed is answered NOT_MASTER: not acknowledged
(its entry may still be committed by the next leader; an idempotent producer's
retry is then answered from the first try).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import random
import time
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path

from broker_core import reply_batch
from broker_core.errors import StoreCorruptError
from broker_core.ha.append_marks import AppendMarks
from broker_core.ha.group_meta import records_arrived
from broker_core.ha.node import Role
from broker_core.protocol import Code
from broker_core.raft import group_figures, member_changes, tables_record
from broker_core.raft.appender import RaftAppender
from broker_core.raft.commitlog_storage import CommitLogStorage
from broker_core.raft.entry_bytes import records_by_queue
from broker_core.raft.loop_timer import call_when_due
from broker_core.raft.messages import Message
from broker_core.raft.node import NotLeader, RaftNode
from broker_core.raft.node import Role as RaftRole
from broker_core.raft.step_aside import EVERY_S, StepAside
from broker_core.raft.tables_record import META_TOPIC
from broker_core.raft.transport import RaftTransport

log = logging.getLogger("floodgate.raft")

ELECTION_S = 0.5  # a leader silent for 0.5-1 s is replaced: the issue asks 2 s at most
HEARTBEAT_S = 0.1


class RaftGroup:
    sync = True  # a send is answered once a majority holds it

    def __init__(self, broker, group: str, peers: dict[str, tuple[str, int]], port: int, *,
                 client_addrs: dict[str, str] | None = None, election_s: float = ELECTION_S,
                 heartbeat_s: float = HEARTBEAT_S, timeout_s: float = 3.0,
                 fuse_moves: float = 0.0, wall: Callable[[], float] = time.time,
                 members: tuple[str, ...] = (), join: bool = False) -> None:
        """`peers`: the other members' Raft addresses; `client_addrs`: each member's
        address for clients (named in NOT_MASTER); `members`: every member as
        NAME=HOST:PORT:RAFT_PORT, the first configuration (or none: `join`)."""
        self.broker, self.group, self.port = broker, group, port
        self.name = broker.config.name
        self.addrs = dict(client_addrs or {})
        self.timeout_s, self.wall = timeout_s, wall
        self._loop = asyncio.get_running_loop()
        store = broker.store
        self.storage = CommitLogStorage(store, Path(broker.config.data_dir) / "raft",
                                        sync=store.config.flush == "sync")
        if members:  # (a store that knows its configuration keeps it: raft.log)
            self.storage.set_bootstrap(() if join else tuple(members))
        self.node = RaftNode(self.name, [self.name, *peers], self.storage,
                             random.Random(), election_s, heartbeat_s, now=self._loop.time(),
                             join=join)
        self.transport = RaftTransport(self.name, group, peers, self._on_message,
                                       ssl_server=broker.tls, ssl_client=broker.tls_peer,
                                       on_refused=self._refused)
        self.appender = RaftAppender(store, self.storage.end_offset, self._propose,
                                     self._loop.call_soon, broker.sends.host,
                                     self.storage.known)
        store.appender = self.appender  # nothing is written to this store but through Raft
        self.role = Role.NONE
        self.since = wall()
        self.events: deque[dict] = deque(maxlen=50)
        self._counts: dict[int, Counter] = {}  # entry index -> its records per queue (leader)
        # when each entry was proposed: a member's lag in seconds, as a master's slave's
        self.marks = AppendMarks(self.storage.last_index())
        self._published = self.storage.index.index_at(store.commitlog.write_offset)
        self._parked: list[tuple[int, int, list]] = []  # (end offset, seq, [done])
        self._deadlines: deque[tuple[float, list]] = deque()
        self._seq = itertools.count()
        self._timer: asyncio.Handle | None = None
        self._timer_due = 0.0  # when `_timer` runs
        self._sweep: asyncio.TimerHandle | None = None
        self.counters = Counter()
        # a slow leader moved on a fuse's word, once it has led `fuse_moves` s (0: never)
        self.aside = StepAside(allowed=fuse_moves > 0, every_s=fuse_moves or EVERY_S)
        self._meta_sent = -1  # the tables' version last proposed
        self._meta_due = -1e18  # not looked at again before then
        self._barrier_waiters: list[Callable[[Code], None]] = []  # proposed at the turn's end
        self._barriers: list[tuple[int, list]] = []  # (entry index, waiters), oldest first
        self.changed = asyncio.Event()  # set (and replaced) when the term or leader moves
        self._seen: tuple[int, str | None] = (self.node.term, None)
        self.members_seen: tuple[str, ...] | None = None
        self.changing = False  # a membership change in flight (one at a time)
        self._sync_members()

    def attach(self) -> RaftGroup:
        self.broker.ha = self
        self.broker.write_path.replication = self
        return self

    async def start(self, bind: str) -> None:
        await self.transport.start(bind, self.port)
        self.drive([])

    async def close(self) -> None:
        for handle in (self._timer, self._sweep):
            if handle is not None:
                handle.cancel()
        self._answer_parked(Code.NOT_MASTER, everything=True)
        await self.transport.close()
        self.appender.stopped = True  # (not unset: the store's own put path would write
        self.storage.close()          # over bytes of the log not committed yet)

    # -- driving the core ------------------------------------------------------------------
    def _on_message(self, msg: Message) -> None:
        try:
            out = self.node.step(msg, self._loop.time())
        except StoreCorruptError as exc:  # bytes that do not verify: not written, not
            # acknowledged; the leader sends them again (a link's flipped bit), or the
            # operator reads why this member stays behind
            self.counters["entries_refused"] += 1
            if self.counters["entries_refused"] % 100 == 1:  # (said once, not per retry)
                self.event("refused", str(exc)[:200])
            out = self.node.entries_refused(msg)
        self.drive(out)

    def _refused(self, peer: str) -> None:
        """A link to `peer` refused: if it led, this member stands now (node.leader_gone)."""
        self.drive(self.node.leader_gone(peer, self._loop.time()))

    def _tick(self) -> None:
        self._timer = None
        self.drive(self.node.tick(self._loop.time()))

    def _propose(self, data: bytes, counts: Counter) -> None:
        now = self._loop.time()
        try:
            with self.storage.own_entries():
                first, out = self.node.propose([data], now, self.transport.send)
        except NotLeader:
            self._answer_parked(Code.NOT_MASTER, everything=True)  # never proposed
            return
        self.marks.mark(first, now)
        self._counts[first] = counts
        self.counters["entries_proposed"] += 1
        self.drive(out)

    def drive(self, out) -> None:
        for to, msg in out:
            self.transport.send(to, msg)
        raft_role = self.node.role  # (compared, not looked up: an Enum's hash is Python code)
        role = Role.MASTER if raft_role is RaftRole.LEADER else \
            Role.SLAVE if raft_role is RaftRole.FOLLOWER else Role.NONE
        if role is not self.role:
            self._role_changed(role)
        seen = (self.node.term, self.node.leader)
        if seen != self._seen:  # HA_STATE watches held on it answer now
            self._seen = seen
            self.changed.set()
            self.changed = asyncio.Event()
        if self.node.members != self.members_seen:
            self._sync_members()
        if self.node.commit > self._published:
            self._publish(self.node.commit)
        if role is Role.MASTER:
            tables_record.write_if_changed(self, self._loop.time())
        # one timer, moved only earlier: one that fires before it is due ticks for nothing
        # and is set again (a leader's next beat moves on with every Append it sends: a
        # timer cancelled and set per message cost more than that tick)
        # (its due time kept here: uvloop answers a call_at due within the millisecond
        # with a plain Handle, which has no when(); asking it raised AttributeError in
        # the drive after a fresh leader's first beat, and in a link's data_received
        # that closed the link)
        due, timer = self.node.next_due(), self._timer
        if timer is None or due < self._timer_due - 1e-4:
            if timer is not None:
                timer.cancel()
            self._timer = call_when_due(self._loop, due, self._tick)
            self._timer_due = due

    def _role_changed(self, role: Role) -> None:
        was, self.role = self.role, role
        if was is Role.MASTER:
            self._answer_parked(Code.NOT_MASTER, everything=True)
            for _index, waiters in self._barriers:
                for done in waiters:
                    done(Code.NOT_MASTER)
            self._barriers.clear()
            self.appender.reset(Counter())
            self._counts.clear()
        self.marks.reset(self.storage.last_index())
        self._meta_sent, self._meta_due = -1, -1e18  # a new leader's tables go out at once
        if role is Role.MASTER:  # go on numbering each queue after the uncommitted tail
            tail = self.storage.entries(self._published + 1, self.storage.last_index())
            self._counts = {e.index: records_by_queue(e.data) for e in tail if e.data}
            self.appender.reset(sum(self._counts.values(), Counter()))
        self.since = self.wall()
        self.event(role.value.lower(), f"term {self.node.term}"
                    + (f", leader {self.node.leader}" if self.node.leader else ""))
        self.broker.role_changed()

    def _publish(self, commit: int) -> None:
        # the sends are answered first, their replies written before the entries are
        # indexed for readers (no read comes in between: one callback); marked published
        # first, as an answer may propose (a duplicate's open entry) and so drive again
        published, self._published = self._published, commit
        with reply_batch.at_once():
            self._answer_parked(Code.OK, upto=self.storage.index.end_of(commit))
        try:
            touched = self.storage.publish(commit)
        except Exception:
            self._published = published  # (tried again at the next drive)
            raise
        for index in range(published + 1, commit + 1):
            counts = self._counts.pop(index, None)
            if counts:
                self.appender.published(counts)
        if (META_TOPIC, 0) in touched:
            touched.discard((META_TOPIC, 0))
            if self.role is not Role.MASTER:
                tables_record.adopt_last(self)
        if touched:
            records_arrived(self.broker, touched)
        while self._barriers and self._barriers[0][0] <= commit:
            for done in self._barriers.pop(0)[1]:
                done(Code.OK)

    # -- the broker's hooks ------------------------------------------------------------------
    def refusal(self) -> tuple[int, bytes] | None:
        if self.role is Role.MASTER and self.node.transfer_to is None:
            return None
        leader = self.node.leader
        where = (f"master is {leader} at {self.addrs[leader]}" if leader in self.addrs
                 else f"master is {leader}" if leader else "no master known")
        return Code.NOT_MASTER, (f"{self.name} is {self.node.role.value} of raft group "
                                 f"{self.group} (term {self.node.term}); {where}").encode()

    def appended(self, end: int) -> None:
        """(The entry is proposed when the loop turn ends: raft.appender.)"""

    def park(self, end: int, done: Callable[[Code], None]) -> Code | None:
        if self.role is not Role.MASTER:
            return Code.NOT_MASTER
        if end <= self.broker.store.commitlog.write_offset:
            return Code.OK
        waiter = [done]
        heapq.heappush(self._parked, (end, next(self._seq), waiter))
        self._deadlines.append((self._loop.time() + self.timeout_s, waiter))
        if self._sweep is None:
            self._sweep = call_when_due(self._loop, self._deadlines[0][0], self._expire)
        return None

    def barrier(self, done: Callable[[Code], None]) -> None:
        """`done(OK)` once an entry proposed after now is committed: this node still
        led after the call (the Raft thesis's read index, through the log), or
        `done(NOT_MASTER)`. What a CONFLICT answer says of the queue was true then."""
        if self.role is not Role.MASTER:
            done(Code.NOT_MASTER)
            return
        if not self._barrier_waiters:
            self._loop.call_soon(self._propose_barrier)
        self._barrier_waiters.append(done)

    def _propose_barrier(self) -> None:
        waiters, self._barrier_waiters = self._barrier_waiters, []
        try:
            index, out = self.node.propose([b""], self._loop.time())
        except NotLeader:
            for done in waiters:
                done(Code.NOT_MASTER)
            return
        self._barriers.append((index, waiters))
        self.drive(out)

    async def wait_replicated(self, end: int) -> Code:
        fut = self._loop.create_future()
        code = self.park(end, lambda c: fut.done() or fut.set_result(c))
        return code if code is not None else await fut

    def _answer_parked(self, code: Code, upto: int = 0, everything: bool = False) -> None:
        parked = self._parked
        while parked and (everything or parked[0][0] <= upto):
            waiter = heapq.heappop(parked)[2]
            done, waiter[0] = waiter[0], None
            if done is not None:
                done(code)

    def _expire(self) -> None:
        self._sweep = None
        now = self._loop.time()
        while self._deadlines and (self._deadlines[0][0] <= now or
                                   self._deadlines[0][1][0] is None):
            waiter = self._deadlines.popleft()[1]
            done, waiter[0] = waiter[0], None
            if done is not None:
                self.counters["timeouts"] += 1
                done(Code.FLUSH_SLAVE_TIMEOUT)
        if self._deadlines:
            self._sweep = call_when_due(self._loop, self._deadlines[0][0], self._expire)

    def transfer(self, to: str) -> None:
        """Hand leadership to `to` (an operator's word); NotLeader when this is no leader."""
        self.drive(self.node.transfer(to, self._loop.time()))

    def step_aside(self, reason: str) -> dict:
        """A client's fuse found this leader slow: hand the group to a follower, if the
        operator allows it (raft.step_aside); NotLeader when this is no leader."""
        if self.role is not Role.MASTER:
            raise NotLeader(self.name, self.node.leader)
        to, why = self.aside.choose(self.node, self._loop.time(), self.wall() - self.since)
        if to is None:
            return {"moved": False, "why": why}
        self.event("step-aside", f"to {to}: {reason or why}")
        self.transfer(to)
        return {"moved": True, "from": self.name, "to": to, "term": self.node.term}

    def _sync_members(self) -> None:
        member_changes.sync_members(self)

    async def change_members(self, add: str | None = None, remove: str | None = None,
                             timeout_s: float = 60.0) -> dict:
        return await member_changes.change_members(self, add, remove, timeout_s)

    # -- figures -----------------------------------------------------------------------------
    def event(self, kind: str, detail: str) -> None:
        self.events.append({"time": self.wall(), "kind": kind, "detail": detail,
                            "epoch": self.node.term})
        log.warning("raft role group=%s broker=%s %s %s", self.group, self.name, kind, detail)

    def figures(self) -> dict:
        return group_figures.figures(self)

    @property
    def epoch(self) -> int:
        return self.node.term
