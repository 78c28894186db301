"""Raft's elections for a group whose log is the CommitLog's byte stream: a leader
writes as a master does and its bytes travel on the master's replication stream
(ha.master, ha.slave), fenced by term; this core only decides who leads a term.

    e = StreamElection("b", ["a", "b", "c"], log, votes, rng)
    out = e.tick(now)            # [(to, message)]: pre-votes, votes, beats
    out = e.step(message, now)   # a peer's message
    e.role, e.term, e.leader

Pure, as raft.node: messages and time in, messages out. A log is compared by the term
of its last byte and where it ends (`log.last_term()`, `log.end()`, Raft's 5.4.1 with
(term, offset) for (term, index)). Terms and votes are saved before they are used
(`votes`, a raft.vote_file). The elections themselves are raft.votes', shared with
raft.node: pre-vote, a vote refused within a live leader's lease, TimeoutNow.

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
from broker_core.raft.elected import Elected
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


class StreamElection(Elected):
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

    # -- beats ---------------------------------------------------------------------------
    def _beat(self, peer: str, now: float) -> tuple[str, Message]:
        self.beat_due[peer] = now + self.heartbeat_s
        return peer, Append(self.term, self.name, 0, 0, (), self.commit)

    def _maybe_timeout_now(self, peer: str, now: float) -> Out:
        if self.match.get(peer, -1) >= self.log.end():
            return [(peer, TimeoutNow(self.term, self.name))]
        return []
