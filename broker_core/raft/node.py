"""One Raft node as a pure state machine: messages and time in, messages out.

    node = RaftNode("b", ["a", "c"], storage, rng=random.Random(seed))
    out = node.tick(now)             # [(to, message)]: elections, heartbeats
    out = node.step(message, now)    # a message from a peer
    first = node.propose([b"..."], now)   # the leader appends (NotLeader elsewhere)
    node.commit                      # entries up to here are on a majority: apply them

Nothing here reads a clock, sleeps or does I/O: the transport and the clock belong
to the caller (a broker's replication link, or the simulator that drives thousands
of seeded schedules through loss, delay, duplication and reordering). What must be
durable goes through the storage first (raft.log): a term and a vote are saved
before a message that depends on them is sent; log entries are appended before they
are acknowledged.

From the Raft paper and its thesis: randomized election timeouts; pre-vote (a node
cut off cannot raise the cluster's term when it comes back); a leader steps down when
it has not heard from a majority for an election timeout (check quorum: an isolated
leader stops acknowledging); a vote is refused within the lease of a live leader;
leadership transfer by TimeoutNow; a new leader's no-op entry commits its forebears'.
The elections themselves are in raft.votes (the term, timers and following, shared with
the stream log's core, in raft.elected); which followers get entries at once, and
which in batches, in raft.pacing.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

from broker_core.raft import membership, pacing, snapshots, votes
from broker_core.raft.elected import Elected, NotLeader  # noqa: F401 - (NotLeader: its home was here)
from broker_core.raft.log import RaftStorage
from broker_core.raft.messages import (
    Append,
    AppendReply,
    Entry,
    Message,
    PreVote,
    PreVoteReply,
    RequestVote,
    Snapshot,
    SnapshotReply,
    TimeoutNow,
    VoteReply,
)
from broker_core.raft.roles import Role

MAX_BATCH = 256  # entries in one Append: the talk's many messages in one round
# and their data at most this (one entry always goes): 256 entries of a loop turn's puts
# each made a frame past what a link takes (raft.wire.MAX_FRAME); the link closed at
# each try, and a member that far behind caught up one entry a redial
MAX_APPEND_BYTES = 4 << 20


Out = list[tuple[str, Message]]


class RaftNode(Elected):
    """`election_s`: a follower that hears no leader for a random time in
    [election_s, 2 x election_s) starts an election; a leader beats every
    `heartbeat_s`. `pre_vote`: ask before taking a term (off only to test the votes
    alone). `peers`: the members the first time the node starts (the bootstrap
    configuration; after that its storage's, raft.membership); `join`: none, it
    joins a running group and votes once a configuration naming it reaches it."""

    max_append_bytes = MAX_APPEND_BYTES

    def __init__(self, name: str, peers: list[str], storage: RaftStorage,
                 rng: random.Random | None = None, election_s: float = 1.0,
                 heartbeat_s: float = 0.1, now: float = 0.0, pre_vote: bool = True,
                 join: bool = False) -> None:
        self.pre_vote = pre_vote
        self.name, self.storage = name, storage
        storage.set_bootstrap(() if join else tuple(sorted(set(peers) | {name})))
        self.peers: list[str] = []  # voters and learners but this node: whom a leader feeds
        self.voters: frozenset[str] = frozenset()
        self.learners: set[str] = set()  # (a leader's: catching up to be added)
        self.members: tuple[str, ...] = ()
        self.config_index = 0
        self.snap: dict[str, list] = {}  # peer -> the snapshot being sent to it
        self.want_snapshot: set[str] = set()
        self.counters: Counter[str] = Counter()
        self.rng = rng or random.Random()
        self.election_s, self.heartbeat_s = election_s, heartbeat_s
        self.role = Role.FOLLOWER
        self.leader: str | None = None
        self.commit = storage.first_index() - 1  # what a snapshot or compaction covers
        self.votes: set[str] = set()
        self.next: dict[str, int] = {}
        self.match: dict[str, int] = {}
        self.heard: dict[str, float] = {}  # peer -> when the leader last heard from it
        self.beat_due: dict[str, float] = {}
        # peers whose last answer refused an Append (a gap, a divergent tail, a store that
        # refuses): sent one entry at a time, at most once a beat, until one is taken
        self.probing: set[str] = set()
        self.prompt: list[str] = []  # the followers whose answers last moved the commit
        self.held: dict[str, int] = {}  # a lazy peer -> the bytes held back from it
        self.transfer_to: str | None = None
        self.transfer_due = 0.0  # a transfer not done by then is given up (thesis 3.10)
        self.leader_seen = -1e18  # when this node last heard a live leader
        self._reset_election(now)
        membership.configure(self, now)

    # -- members -------------------------------------------------------------------------
    def configure(self, now: float) -> None:
        membership.configure(self, now)

    # -- time ----------------------------------------------------------------------------
    def tick(self, now: float) -> Out:
        if self.role is Role.LEADER:
            if not self._still_leading(now):
                return []
            return [m for p in self.peers if now >= self.beat_due[p]
                    for m in self._replicate(p, now)]
        if now < self.election_due:
            return []
        if self.name not in self.voters:  # a learner, joining or removed: never stands
            self._reset_election(now)
            return []
        return votes.pre_vote(self, now) if self.pre_vote else votes.campaign(self, now, False)

    # -- proposing -----------------------------------------------------------------------
    def propose(self, datas: list[bytes], now: float,
                send: Callable[[str, Message], None] | None = None) -> tuple[int, Out]:
        """Append `datas` as entries of this leader's term: (the first's index, the
        Appends that carry them). `send`: where the Appends to followers in step go
        before this leader writes its own log (the thesis, 10.2.1: a leader writes in
        parallel with its followers; at one send in flight its write left the path a
        send waits on). It counts itself once its write is done, in this call."""
        self.refuse_unless_leading()
        s, first = self.storage, self.storage.last_index() + 1
        entries = [Entry(self.term, first + i, d) for i, d in enumerate(datas)]
        sent = pacing.send_in_step(self, entries, now, send) if send is not None else ()
        try:
            s.append(entries)
        except BaseException:
            if sent:  # followers may hold entries of this term this log lacks: never
                self._become_follower(self.term, None, now)  # number them again
            raise
        self._advance_commit()
        probing = self.probing  # (fed at its beats, not at every proposal)
        size = sum(len(d) for d in datas)
        return first, [m for p in self.peers if p not in probing and p not in sent
                       and not pacing.held_back(self, p, now, size)
                       for m in self._replicate(p, now)]

    # -- messages ------------------------------------------------------------------------
    def step(self, msg: Message, now: float) -> Out:
        kind = type(msg)
        if kind is Append or kind is AppendReply:  # nearly every message: no chain of tests
            if msg.term > self.term:
                self._become_follower(msg.term, msg.leader if kind is Append else None, now)
            return self._on_append(msg, now) if kind is Append else \
                self._on_append_reply(msg, now)
        if kind is PreVote:
            return votes.on_pre_vote(self, msg, now)
        if kind is RequestVote:
            return votes.on_vote(self, msg, now)
        if kind is PreVoteReply:
            return votes.on_pre_vote_reply(self, msg, now)
        if msg.term > self.term:
            self._become_follower(msg.term, None, now)
        if kind is VoteReply:
            return votes.on_vote_reply(self, msg, now)
        if kind is Snapshot:
            return snapshots.on_snapshot(self, msg, now)
        if kind is SnapshotReply:
            if self.role is not Role.LEADER or msg.term != self.term:
                return []
            return snapshots.on_snapshot_reply(self, msg, now)
        if (kind is TimeoutNow and msg.term == self.term and self.role is Role.FOLLOWER
                and self.name in self.voters):
            return votes.campaign(self, now, transfer=True)
        return []

    # -- elections -----------------------------------------------------------------------
    def _become_leader(self, now: float) -> Out:
        self.role, self.leader, self.transfer_to = Role.LEADER, self.name, None
        last = self.storage.last_index()
        self.next = {p: last + 1 for p in self.peers}
        self.match = {p: 0 for p in self.peers}
        self.heard = {p: now for p in self.peers}  # a fresh leader gets a full timeout
        self.beat_due = {p: now for p in self.peers}
        self.probing, self.prompt = set(), []  # (every follower prompt till one answers)
        self.election_due = now + self.election_s
        self.storage.append([Entry(self.term, last + 1)])  # the no-op of its term
        self._advance_commit()
        return [m for p in self.peers for m in self._replicate(p, now)]

    # -- replication ---------------------------------------------------------------------
    def _replicate(self, peer: str, now: float) -> Out:
        s = self.storage
        nxt = self.next[peer]
        if peer in self.snap or peer in self.want_snapshot or nxt < s.first_index():
            return snapshots.snapshot_out(self, peer, now)  # entries cannot catch it up
        # probing: one entry, sent again at each beat until it is taken (a member whose
        # store refused every entry was sent a whole batch every other beat)
        probing = peer in self.probing
        entries = tuple(s.entries(nxt, min(s.last_index(), nxt if probing
                                           else nxt + MAX_BATCH - 1), self.max_append_bytes))
        self.beat_due[peer] = now + self.heartbeat_s
        self.held[peer] = 0
        if entries and not probing:  # pipelined: the next Append starts past these
            self.next[peer] = entries[-1].index + 1  # (a refusal rewinds)
        return [(peer, Append(self.term, self.name, nxt - 1, s.term_at(nxt - 1), entries,
                              self.commit))]

    def _on_append(self, msg: Append, now: float) -> Out:
        s = self.storage
        if msg.term < self.term:
            return [(msg.leader, AppendReply(self.term, self.name, False, 0))]
        self.follow(msg.term, msg.leader, now)
        last = s.last_index()
        if msg.prev_index > last:
            return [(msg.leader, AppendReply(self.term, self.name, False, last + 1))]
        if msg.prev_index < s.first_index() - 1:  # before its snapshot: committed here
            return [(msg.leader, AppendReply(self.term, self.name, False, s.first_index()))]
        if s.term_at(msg.prev_index) != msg.prev_term:
            conflict, hint = s.term_at(msg.prev_index), msg.prev_index
            while hint > self.commit + 1 and s.term_at(hint - 1) == conflict:
                hint -= 1
            return [(msg.leader, AppendReply(self.term, self.name, False, hint))]
        new, reconfigure = [], False
        for e in msg.entries:
            if e.index <= s.last_index():
                if s.term_at(e.index) == e.term:
                    continue
                if e.index <= self.commit:
                    raise AssertionError(f"{self.name}: leader {msg.leader} would cut "
                                         f"committed entry {e.index}")
                s.truncate(e.index)  # a divergent tail the leader never had
                reconfigure = True  # (it may have held a configuration)
            new.append(e)
            reconfigure = reconfigure or e.members is not None
        if new:
            s.append(new)
        if reconfigure:
            self.configure(now)
        match = msg.prev_index + len(msg.entries)
        self.commit = max(self.commit, min(msg.commit, match))
        return [(msg.leader, AppendReply(self.term, self.name, True, match))]

    def _on_append_reply(self, msg: AppendReply, now: float) -> Out:
        if self.role is not Role.LEADER or msg.term != self.term:
            return []
        peer = msg.follower
        if peer not in self.next:  # no longer a member
            return []
        self.heard[peer] = now
        if msg.success:
            if peer in self.probing:
                self.probing.discard(peer)
            match = self.match
            if msg.match > match[peer]:
                match[peer] = msg.match
                if msg.match > self.commit:  # (else no majority moved: a second answer)
                    was = self.commit
                    self._advance_commit()
                    if self.commit > was and peer in self.voters:
                        pacing.prompt(self, peer)
            self.next[peer] = max(self.next[peer], match[peer] + 1)
            if self.name not in self.voters:  # its own removal: committed?
                out = membership.removed_leader_steps_down(self, now)
                if self.role is not Role.LEADER:
                    return out
            if self.transfer_to == peer:
                return self._maybe_timeout_now(peer, now)
            if self.next[peer] <= self.storage.last_index() and \
                    not pacing.held_back(self, peer, now):
                return self._replicate(peer, now)
            return []
        hint = min(msg.match, self.storage.last_index() + 1)
        if hint <= self.match[peer]:  # it lacks what it acknowledged (its host lost the
            self.match[peer] = hint - 1  # page cache): send from where it ends now
        was, self.next[peer] = self.next[peer], max(self.match[peer] + 1, hint)
        if peer in self.probing and self.next[peer] == was:
            return []  # it refused the very entry it was sent: again at its next beat
        self.probing.add(peer)
        return self._replicate(peer, now)

    def entries_refused(self, msg: Message) -> Out:
        """This node's store refused what `msg` carried (records that do not verify):
        an Append is answered with where this log ends, so that the leader hears this
        member alive, and behind, and sends the entry again at its next beat."""
        if type(msg) is not Append or msg.term < self.term:
            return []
        return [(msg.leader, AppendReply(self.term, self.name, False,
                                         self.storage.last_index() + 1))]

    def _advance_commit(self) -> None:
        """The highest entry a majority of the voters holds (this leader among them
        unless a change removed it)."""
        last, name, match, voters = self.storage.last_index(), self.name, self.match, self.voters
        quorum = len(voters) // 2 + 1
        marks = sorted([last if p == name else match.get(p, 0) for p in voters], reverse=True)
        if len(marks) < quorum:
            return
        n = marks[quorum - 1]
        if n > self.commit and self.storage.term_at(n) == self.term:
            self.commit = n  # only its own term's entries by counting (Raft, 5.4.2)

    def _maybe_timeout_now(self, peer: str, now: float) -> Out:
        if self.match.get(peer) == self.storage.last_index():
            return [(peer, TimeoutNow(self.term, self.name))]
        return self._replicate(peer, now)
