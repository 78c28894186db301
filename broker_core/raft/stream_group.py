"""StreamGroup: a broker's part in a raft group whose log is the CommitLog's byte stream
(docs/topics/raft-groups.md, "How it works").

The leader writes as a master does, and its bytes go to the followers on the master's
replication stream, fenced by term (raft.stream_replication); Raft decides who leads a
term (raft.stream_election), its messages on the group's links (raft.transport), whose
port also takes the stream's links. It stands where a controller's group member stands
(`broker.ha`, the write path's `replication`).

A term's leader: its epoch file says where the term began (ha.epochs, the term as the
epoch); the records it held of older terms go behind the confirm gate; its first record
(the group's tables) gives the term bytes of its own at once, so that what it holds is
committed as soon as a majority holds that record. A follower follows the leader it
heard, and shows readers only what the leader says is committed.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path

from broker_core.errors import BrokerError
from broker_core.ha.epochs import EpochFile
from broker_core.ha.group_meta import adopt_meta, meta_doc, records_arrived
from broker_core.ha.node import Role
from broker_core.ha.slave import MasterInfo
from broker_core.protocol import Code
from broker_core.raft import stream_figures, stream_members, tables_record
from broker_core.raft.loop_timer import call_when_due
from broker_core.raft.messages import Append, Message
from broker_core.raft.published_mark import PublishedMark, reopen
from broker_core.raft.roles import Role as RaftRole
from broker_core.raft.step_aside import EVERY_S, StepAside
from broker_core.raft.stream_election import NotLeader, StreamElection
from broker_core.raft.stream_replication import QuorumMaster, StreamFollower
from broker_core.raft.tables_record import META_TOPIC
from broker_core.raft.transport import RaftTransport
from broker_core.raft.vote_file import VoteFile

log = logging.getLogger("floodgate.raft")

SAVE_EVERY_S = 1.0
ELECTION_S = 0.5  # a leader silent for 0.5-1 s is replaced: the issue asks 2 s at most
HEARTBEAT_S = 0.1


class StreamGroup:
    sync = True

    def __init__(self, broker, group: str, peers: dict[str, tuple[str, int]], port: int, *,
                 client_addrs: dict[str, str] | None = None, election_s: float = ELECTION_S,
                 heartbeat_s: float = HEARTBEAT_S, timeout_s: float = 3.0,
                 fuse_moves: float = 0.0, wall: Callable[[], float] = time.time,
                 members: tuple[str, ...] = (), join: bool = False) -> None:
        """`peers`: the other members' Raft addresses (their stream's too); `members`:
        every member as NAME=HOST:PORT:RAFT_PORT, the first configuration (or none:
        `join`, a member added to a running group)."""
        self.broker, self.group, self.port = broker, group, port
        self.name = broker.config.name
        self.addrs = dict(client_addrs or {})
        self.stream_addrs = {n: f"{host}:{p}" for n, (host, p) in peers.items()}
        self.wall = wall
        self._loop = asyncio.get_running_loop()
        store = broker.store
        raft_dir = Path(broker.config.data_dir) / "raft"
        if (raft_dir / "entries").is_dir():  # (floodgate's first shape of the Raft log)
            raise BrokerError(f"{raft_dir} holds a Raft log of entries, a shape this version "
                              "no longer reads: start the group on empty data directories")
        raft_dir.mkdir(parents=True, exist_ok=True)
        self.votes = VoteFile(raft_dir / "vote.json")
        self.epochs = EpochFile(raft_dir / "epochs.json")
        self.published = PublishedMark(raft_dir / "published.json")
        self.replica = store.replica_log()
        # the end of the last whole record held; what is not known committed is hidden
        self.tail = [reopen(self.replica, self.published)]
        self.role = Role.NONE
        self.configs = stream_members.open_configs(raft_dir / "members.json", self.end(),
                                                   members, join)
        self.learners: set[str] = set()  # (a leader's: members being added)
        self.changing = False  # a change of members in flight (one at a time)
        self.config_offset = -2
        self.election = StreamElection(self.name, [], self, self.votes, random.Random(),
                                       election_s, heartbeat_s, now=self._loop.time())
        self.node = self.election  # (what the HTTP and control ops read: term, leader)
        self.master = QuorumMaster(
            store, group, self.name, lambda: self.election.voters,
            lambda: self.election.voters | self.election.learners,
            lambda start, end: stream_members.between(self, start, end), timeout_s=timeout_s,
            epoch=lambda: self.election.term, history=lambda: self.epochs.history,
            is_master=lambda: self.role is Role.MASTER, meta=lambda: meta_doc(broker),
            meta_version=broker.meta_version)
        self.master.readable = self._readable
        self.follower: StreamFollower | None = None
        self.transport = RaftTransport(self.name, group, peers, self._on_message,
                                       ssl_server=broker.tls, ssl_client=broker.tls_peer,
                                       on_refused=self._refused)
        self.led = 0  # the term this broker began as master in
        self.since = wall()
        self.events: deque[dict] = deque(maxlen=50)
        self.counters: Counter[str] = Counter()
        # a slow leader moved on a fuse's word, once it has led `fuse_moves` s (0: never)
        self.aside = StepAside(allowed=fuse_moves > 0, every_s=fuse_moves or EVERY_S)
        self._timer: asyncio.Handle | None = None
        self._timer_due = 0.0
        self._applying: asyncio.Task | None = None
        self._saved_at = 0.0
        self._meta_sent, self._meta_due = -1, -1e18
        self.changed = asyncio.Event()
        self._seen: tuple[int, str | None] = (self.election.term, None)
        stream_members.apply(self)  # who votes, whom it links to

    # -- the log, as the election compares it (raft.stream_election.StreamLog) ---------------
    def end(self) -> int:
        if self.role is Role.MASTER:
            return self.broker.store.commitlog.write_offset
        return self.tail[0]

    def last_term(self) -> int:
        return self.epochs.history.term_of_last_byte(self.end())

    # -- start and stop ----------------------------------------------------------------------
    def attach(self) -> StreamGroup:
        self.broker.ha = self
        self.broker.write_path.replication = self
        return self

    async def start(self, bind: str) -> None:
        await self.transport.start(bind, self.port, stream_link=self.master.link_factory)
        self.drive([])

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self.follower is not None:
            await self.follower.stop()
        self.master.stop()
        self.save_published()
        await self.transport.close()

    def save_published(self) -> None:
        """How far readers see (a lower bound of what is committed): on a restart the
        records past it leave the queues until the leader says they are committed."""
        shown = self.broker.store.commitlog.write_offset
        held = self.master.gate.first_held()  # (a leader's records no majority holds yet)
        self.published.save(shown if held is None else min(shown, held))
        self._saved_at = self._loop.time()

    # -- driving the election ----------------------------------------------------------------
    def _on_message(self, msg: Message) -> None:
        now = self._loop.time()
        out = self.election.step(msg, now)
        following = self.follower
        if type(msg) is Append and following is not None and msg.term == self.election.term \
                and (msg.leader, msg.term) == (following.master.name, following.master.epoch):
            following.publish(msg.commit)  # a beat's commit: readers go on
        self.drive(out)

    def _refused(self, peer: str) -> None:
        self.drive(self.election.leader_gone(peer, self._loop.time()))

    def _tick(self) -> None:
        self._timer = None
        now = self._loop.time()
        self.election.commit = self.master.committed
        if now - self._saved_at >= SAVE_EVERY_S:
            self.save_published()
        self.drive(self.election.tick(now))

    def drive(self, out) -> None:
        for to, msg in out:
            self.transport.send(to, msg)
        e = self.election
        seen = (e.term, e.leader)
        if seen != self._seen:
            self._seen = seen
            self.changed.set()
            self.changed = asyncio.Event()
        if self._wanted() != self._applied() and self._applying is None:
            self._applying = asyncio.ensure_future(self._apply())
        if self.role is Role.MASTER:
            self._propose_meta(self._loop.time())
        due = e.next_due()
        if self._timer is None or due < self._timer_due - 1e-4:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = call_when_due(self._loop, due, self._tick)
            self._timer_due = due

    # -- the stream following the election ------------------------------------------------
    def _wanted(self) -> tuple:
        e = self.election
        if e.role is RaftRole.LEADER:
            return ("lead", e.term)
        return ("follow", e.leader, e.term) if e.leader else ("none",)

    def _applied(self) -> tuple:
        if self.role is Role.MASTER:
            return ("lead", self.led)
        if self.follower is not None:
            return ("follow", self.follower.master.name, self.follower.master.epoch)
        return ("none",)

    async def _apply(self) -> None:
        """Change the stream's side until it is what the election says (one change at a
        time: each may wait for a link to stop)."""
        try:
            while (want := self._wanted()) != self._applied():
                try:
                    await self._change(want)
                except Exception as exc:  # noqa: BLE001 - said, and tried again: a store
                    # that refused (a full disk) must not leave the group without a side
                    log.exception("raft group %s: could not become %s", self.group, want)
                    self.event("stuck", f"{want[0]}: {exc}"[:200])
                    await asyncio.sleep(0.5)
        finally:
            self._applying = None

    async def _change(self, want: tuple) -> None:
        """One step towards `want`: stop following, stop leading, or take the new side."""
        if self.follower is not None:
            follower, self.follower = self.follower, None
            await follower.stop()  # no byte of it after this
        elif self.role is Role.MASTER:
            self.master.stop()  # (what no majority holds leaves the queues)
            self.tail[0] = max(self.replica.received, self.broker.store.commitlog.write_offset)
            self._role(Role.NONE, f"term {self.election.term}")
        elif want[0] == "lead":
            self._lead(want[1])
        elif want[0] == "follow":
            self._follow(want[1], want[2])
        else:
            self._role(Role.NONE, f"term {self.election.term}, no leader known")

    def _lead(self, term: int) -> None:
        if max(self.replica.received, self.replica.offset) > self.tail[0]:  # part of a
            # record: not ours
            self.replica.truncate(self.tail[0])
        start = self.tail[0]
        self.configs.cut(start)
        self.epochs.begin(term, start)
        self.master.term_start, self.led = start, term
        self.master.start()
        # the older terms' records it holds wait behind the gate, as its own will
        self.replica.publish(start, crc=True, gate=self.master.gate)
        self._role(Role.MASTER, f"term {term}, log at {start}")
        self._meta_sent, self._meta_due = -1, -1e18
        self._propose_meta(self._loop.time())  # its term's first record

    def _follow(self, leader: str, term: int) -> None:
        stream_members.cut(self, self.tail[0])  # (what the leader has comes ahead of its bytes)
        info = MasterInfo(leader, self.stream_addrs[leader], term)
        self.follower = StreamFollower(
            self.broker.store, self.epochs, self.name, self.group, info,
            known_epoch=lambda: self.election.term, on_records=self._on_records,
            on_meta=lambda doc: adopt_meta(self.broker, doc), on_truncate=self._truncated,
            tls=self.broker.tls_peer, log_end=self.tail,
            on_config=lambda offset, members: stream_members.received(self, offset, members))
        self.follower.start()
        self._role(Role.SLAVE, f"of {leader} (term {term})")

    def _role(self, role: Role, detail: str) -> None:
        self.role = role
        self.since = self.wall()
        self.event(role.value.lower(), detail)
        self.broker.role_changed()

    def _readable(self, touched: set[tuple[str, int]]) -> None:
        """A majority holds the leader's records of these queues: readers may take them."""
        for topic, qid in touched:
            self.broker.pulls.readable(topic, qid)

    def _on_records(self, touched: set[tuple[str, int]]) -> None:
        if (META_TOPIC, 0) in touched:
            touched.discard((META_TOPIC, 0))
            tables_record.adopt_last(self)
        if touched:
            records_arrived(self.broker, touched)

    def _truncated(self, offset: int, cut: int) -> None:
        self.tail[0] = min(self.tail[0], offset)
        stream_members.cut(self, offset)
        self.event("truncated", f"log cut at {offset}: {cut} bytes the leader never had")

    # -- the group's tables as records of the log ----------------------------------------------
    def _propose_meta(self, now: float) -> None:
        result = tables_record.write_if_changed(self, now)
        if result is not None and result.ok:
            self.master.appended(result.end_offset)

    # -- the broker's hooks ------------------------------------------------------------------
    def refusal(self) -> tuple[int, bytes] | None:
        e = self.election
        if self.role is Role.MASTER and e.role is RaftRole.LEADER and e.transfer_to is None:
            return None
        leader = e.leader
        where = (f"master is {leader} at {self.addrs[leader]}" if leader in self.addrs
                 else f"master is {leader}" if leader else "no master known")
        return Code.NOT_MASTER, (f"{self.name} is {e.role.value} of raft group "
                                 f"{self.group} (term {e.term}); {where}").encode()

    def appended(self, end: int) -> None:
        self.master.appended(end)

    def park(self, end: int, done: Callable[[Code], None]) -> Code | None:
        if self.role is not Role.MASTER:
            return Code.NOT_MASTER
        return self.master.park(end, done)

    async def wait_replicated(self, end: int) -> Code:
        if self.role is not Role.MASTER:
            return Code.NOT_MASTER
        return await self.master.wait(end)

    def barrier(self, done: Callable[[Code], None]) -> None:
        """`done(OK)` once a record written after now is committed (this broker led
        then), or `done(NOT_MASTER)`."""
        if self.refusal() is not None:
            done(Code.NOT_MASTER)
            return
        result = self.broker.store.put(META_TOPIC, 1, b"", wait=False)
        if not result.ok:
            done(Code.SYSTEM_ERROR)
            return
        self.master.appended(result.end_offset)
        code = self.master.park(result.end_offset, done)
        if code is not None:
            done(code)

    def transfer(self, to: str) -> None:
        self.drive(self.election.transfer(to, self._loop.time()))

    def step_aside(self, reason: str) -> dict:
        """A client's fuse found this leader slow: hand the group to a follower, if the
        operator allows it (raft.step_aside); NotLeader when this is no leader."""
        if self.role is not Role.MASTER:
            raise NotLeader(self.name, self.election.leader)
        e = self.election
        e.commit = self.master.committed
        for peer, acked in self.master.acked.items():  # (fresher than the last beat's answer)
            if peer in e.match:
                e.match[peer] = max(e.match[peer], acked)
        to, why = self.aside.choose(e, self._loop.time(), self.wall() - self.since)
        if to is None:
            return {"moved": False, "why": why}
        self.event("step-aside", f"to {to}: {reason or why}")
        self.transfer(to)
        return {"moved": True, "from": self.name, "to": to, "term": self.election.term}

    async def change_members(self, add: str | None = None, remove: str | None = None,
                             timeout_s: float = 60.0) -> dict:
        return await stream_members.change_members(self, add, remove, timeout_s)

    # -- figures -----------------------------------------------------------------------------
    def event(self, kind: str, detail: str) -> None:
        self.events.append({"time": self.wall(), "kind": kind, "detail": detail,
                            "epoch": self.election.term})
        log.warning("raft role group=%s broker=%s %s %s", self.group, self.name, kind, detail)

    @property
    def epoch(self) -> int:
        return self.election.term

    def figures(self) -> dict:
        return stream_figures.figures(self)
