"""Raft's elections for a group whose log is the CommitLog's byte stream: a leader
writes as a master does and its bytes travel on the master's replication stream
(ha.master, ha.slave), fenced by term; this core only decides who leads a term.

    e = StreamElection("b", ["a", "b", "c"], log, votes, rng)
    out = e.tick(now)            # [(to, message)]: pre-votes, votes, beats
    out = e.step(message, now)   # a peer's message
    e.role, e.term, e.leader

Pure: messages and time in, messages out. A log is compared by the term of its last
byte and where it ends (`log.last_term()`, `log.end()`, Raft's 5.4.1 with (term, offset)
for (term, index)). Terms and votes are saved before they are used (`votes`, a
raft.vote_file). The votes themselves are raft.votes': pre-vote, a vote refused within a
live leader's lease, TimeoutNow. A follower heard from no majority for an election
timeout stands; a leader that hears no majority for as long steps down (check quorum);
a follower whose link to its leader is refused (the process is gone) stands within
beats (`leader_gone`).

A leader beats every `heartbeat_s` (an Append with no entries, carrying the offset a
majority holds: `commit`, set by its group); a follower answers where its log ends
(`match`), which is how a leader hears it alive (check quorum: a leader that has not
heard a majority for an election timeout steps down) and knows a transfer's target
holds everything.
"""

from __future__ import annotations

import random
from typing import Protocol

from broker_core.raft import votes as elections
from broker_core.raft.messages import (
    Append,
    AppendReply,
    Message,
    PreVote,
    PreVoteReply,
    RequestVote,
    TimeoutNow,
    VoteReply,
)
from broker_core.raft.roles import Role

Out = list[tuple[str, Message]]


class StreamLog(Protocol):
    def end(self) -> int:
        """Where this member's log ends: past its last whole record."""
        ...

    def last_term(self) -> int:
        """The term whose leader wrote the log's last byte (0: an empty log)."""
        ...


class VoteStore(Protocol):
    term: int
    voted_for: str | None

    def save_vote(self, term: int, voted_for: str | None) -> None: ...


class NotLeader(Exception):
    """Proposed to a node that does not lead: `leader`, the one it knows of (or None)."""

    def __init__(self, node: str, leader: str | None) -> None:
        super().__init__(f"{node} is not the leader" + (f"; {leader} is" if leader else
                                                        "; no leader is known"))
        self.leader = leader


class _Ballot:
    """What raft.votes reads of a node's storage: its vote, and its log as (term, end)."""

    def __init__(self, log: StreamLog, votes: VoteStore) -> None:
        self.log, self.votes = log, votes

    @property
    def term(self) -> int:
        return self.votes.term

    @property
    def voted_for(self) -> str | None:
        return self.votes.voted_for

    def save_vote(self, term: int, voted_for: str | None) -> None:
        self.votes.save_vote(term, voted_for)

    def last_index(self) -> int:
        return self.log.end()

    def term_at(self, _end: int) -> int:  # (asked only of the log's end)
        return self.log.last_term()


class StreamElection:
    def __init__(self, name: str, voters: list[str], log: StreamLog, votes: VoteStore,
                 rng: random.Random | None = None, election_s: float = 1.0,
                 heartbeat_s: float = 0.1, now: float = 0.0, pre_vote: bool = True) -> None:
        self.name, self.log, self.pre_vote = name, log, pre_vote
        self.storage = _Ballot(log, votes)
        self.voters: frozenset[str] = frozenset()
        self.learners: frozenset[str] = frozenset()  # a leader's: fed, no vote (joining)
        self.peers: list[str] = []  # whom a leader beats: voters and learners but itself
        self.rng = rng or random.Random()
        self.election_s, self.heartbeat_s = election_s, heartbeat_s
        self.role = Role.FOLLOWER
        self.leader: str | None = None
        self.votes: set[str] = set()
        self.commit = 0  # a leader's: the offset a majority holds (its group sets it)
        self.match: dict[str, int] = {}  # a leader's: where each follower said it ends
        self.heard: dict[str, float] = {}
        self.beat_due: dict[str, float] = {}
        self.transfer_to: str | None = None
        self.transfer_due = 0.0
        self.leader_seen = -1e18
        self._reset_election(now)
        self.configure(voters, (), now)

    # -- members -------------------------------------------------------------------------
    def configure(self, voters, learners, now: float) -> None:
        """The members in force (raft.stream_members): who votes, and whom a leader feeds
        besides. A member that is no voter (joining, or removed) never stands."""
        self.voters, self.learners = frozenset(voters), frozenset(learners) - set(voters)
        peers = sorted((self.voters | self.learners) - {self.name})
        if self.role is Role.LEADER:
            for p in peers:
                if p not in self.heard:
                    self.heard[p], self.beat_due[p], self.match[p] = now, now, 0
            for table in (self.heard, self.beat_due, self.match):
                for p in [p for p in table if p not in peers]:
                    del table[p]
        self.peers = peers

    @property
    def term(self) -> int:
        return self.storage.term

    @property
    def quorum(self) -> int:
        return len(self.voters) // 2 + 1

    def refuse_unless_leading(self) -> None:
        if self.role is not Role.LEADER or self.transfer_to is not None:
            raise NotLeader(self.name, self.transfer_to or self.leader)

    def next_due(self) -> float:
        """When `tick` has something to do next."""
        if self.role is Role.LEADER:
            due = min(self.beat_due.values(), default=self.election_due)
            return min(due, self.transfer_due) if self.transfer_to is not None else due
        return self.election_due

    def _still_leading(self, now: float) -> bool:
        """A leader's tick: a transfer not done in time is given up; False once it has
        heard no majority for an election timeout (check quorum: it steps down, so that a
        leader cut off acknowledges nothing more)."""
        if self.transfer_to is not None and now >= self.transfer_due:
            self.transfer_to = None  # its target never took over: lead on
        alive = (self.name in self.voters) + sum(
            1 for p in self.peers if p in self.voters
            and now - self.heard.get(p, -1e18) < self.election_s)
        if alive < self.quorum and now >= self.election_due:
            self._become_follower(self.term, None, now)
            return False
        if alive >= self.quorum:
            self.election_due = now + self.election_s
        return True

    def transfer(self, to: str, now: float) -> list:
        """Hand leadership to `to` once it holds the whole log (sends refused meanwhile, so
        that the log stops growing); `_maybe_timeout_now` says when."""
        if self.role is not Role.LEADER or to not in self.voters or to == self.name:
            raise NotLeader(self.name, self.leader)
        self.transfer_to, self.transfer_due = to, now + self.election_s
        return self._maybe_timeout_now(to, now)

    def leader_gone(self, peer: str, now: float) -> list:
        """A follower's link to its leader was refused: nothing listens there, the leader
        process is gone. It stops holding the leader's lease and stands within beats,
        not an election timeout: the members who saw it in the order of their names, a
        beat apart (all at once, they would split the vote and wait a timeout). Safe
        whatever the report's truth: a member that still hears the leader refuses its
        pre-vote, and the leader's next message makes it a follower again."""
        if self.role is not Role.FOLLOWER or peer != self.leader:
            return []
        self.leader, self.leader_seen = None, -1e18
        if self.name not in self.voters:
            return []
        rank = sorted(p for p in self.voters if p != peer).index(self.name)
        stand = now + self.heartbeat_s * (rank + 0.2 * self.rng.random())
        self.election_due = min(self.election_due, stand)
        return []

    def follow(self, term: int, leader: str, now: float) -> None:
        """A leader of the current term was heard."""
        if self.role is not Role.FOLLOWER:
            self._become_follower(term, leader, now)
        self.leader, self.leader_seen = leader, now
        self._reset_election(now)

    # -- time ----------------------------------------------------------------------------
    def tick(self, now: float) -> Out:
        if self.role is Role.LEADER:
            if not self._still_leading(now):
                return []
            return [self._beat(p, now) for p in self.peers if now >= self.beat_due[p]]
        if now < self.election_due:
            return []
        if self.name not in self.voters:  # joining or removed: never stands
            self._reset_election(now)
            return []
        if self.pre_vote:
            return elections.pre_vote(self, now)
        return elections.campaign(self, now, False)

    # -- messages ------------------------------------------------------------------------
    def step(self, msg: Message, now: float) -> Out:
        kind = type(msg)
        if kind is PreVote:
            return elections.on_pre_vote(self, msg, now)
        if kind is RequestVote:
            return elections.on_vote(self, msg, now)
        if kind is PreVoteReply:
            return elections.on_pre_vote_reply(self, msg, now)
        if msg.term > self.term:
            self._become_follower(msg.term, msg.leader if kind is Append else None, now)
        if kind is VoteReply:
            return elections.on_vote_reply(self, msg, now)
        if kind is Append:
            if msg.term < self.term:  # a deposed leader: tell it the term
                return [(msg.leader, AppendReply(self.term, self.name, False, 0))]
            self.follow(msg.term, msg.leader, now)
            return [(msg.leader, AppendReply(self.term, self.name, True, self.log.end()))]
        if kind is AppendReply:
            if self.role is Role.LEADER and msg.term == self.term and msg.follower in \
                    self.peers:
                self.heard[msg.follower] = now
                self.match[msg.follower] = msg.match
                if self.transfer_to == msg.follower:
                    return self._maybe_timeout_now(msg.follower, now)
            return []
        if (kind is TimeoutNow and msg.term == self.term and self.role is Role.FOLLOWER
                and self.name in self.voters):
            return elections.campaign(self, now, transfer=True)
        return []

    def _become_leader(self, now: float) -> Out:
        self.role, self.leader, self.transfer_to = Role.LEADER, self.name, None
        self.commit = 0
        self.match = {p: 0 for p in self.peers}
        self.heard = {p: now for p in self.peers}  # a fresh leader gets a full timeout
        self.beat_due = {p: now for p in self.peers}
        self.election_due = now + self.election_s
        return [self._beat(p, now) for p in self.peers]

    # -- what raft.votes calls --------------------------------------------------------
    def _reset_election(self, now: float) -> None:
        self.election_due = now + self.election_s * (1 + self.rng.random())

    def _in_lease(self, now: float) -> bool:
        """A leader was heard within the shortest election timeout: do not help unseat it."""
        return self.role is Role.LEADER or now - self.leader_seen < self.election_s

    def _become_follower(self, term: int, leader: str | None, now: float) -> None:
        if term != self.term:
            self.storage.save_vote(term, None)
        if self.role is not Role.FOLLOWER:
            self._reset_election(now)
        self.role, self.leader, self.votes, self.transfer_to = Role.FOLLOWER, leader, set(), None

    # -- beats ---------------------------------------------------------------------------
    def _beat(self, peer: str, now: float) -> tuple[str, Message]:
        self.beat_due[peer] = now + self.heartbeat_s
        return peer, Append(self.term, self.name, self.commit)

    def _maybe_timeout_now(self, peer: str, now: float) -> Out:
        if self.match.get(peer, -1) >= self.log.end():
            return [(peer, TimeoutNow(self.term, self.name))]
        return []
