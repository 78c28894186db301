"""What both of a raft group's cores share (raft.node, the log as entries;
raft.stream_election, the log as the CommitLog's stream): the term and the majority,
the election timer and a live leader's lease, stepping down, following, and standing
early when the leader's process is gone. raft.votes runs the elections on these."""

from __future__ import annotations

from broker_core.raft.roles import Role


class NotLeader(Exception):
    """Proposed to a node that does not lead: `leader`, the one it knows of (or None)."""

    def __init__(self, node: str, leader: str | None) -> None:
        super().__init__(f"{node} is not the leader" + (f"; {leader} is" if leader else
                                                        "; no leader is known"))
        self.leader = leader


class Elected:
    """A subclass sets name, storage (its term and vote), role, leader, votes, voters,
    transfer_to, transfer_due, peers, heard, beat_due, rng, election_s, heartbeat_s,
    election_due and leader_seen."""

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
        that the log stops growing); the subclass's `_maybe_timeout_now` says when."""
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

    # -- what raft.votes calls --------------------------------------------------------------
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
