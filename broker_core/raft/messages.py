"""What the members of a raft group say to each other: the Raft paper's elections, with
the pre-vote of its thesis (section 9.6) and TimeoutNow for a leadership transfer
(section 3.10), and the leader's beat. The log's bytes do not travel here: they go on the
master's replication stream (raft.stream_replication), so AppendEntries carries no
entries, only the offset a majority holds.

Plain frozen dataclasses: the elections (raft.stream_election) are pure, and a transport
(in-process for the simulator, TCP between brokers) carries them as it likes. A log is
named by where it ends (`last_index`, an offset) and the term of its last byte.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PreVote:
    """Would you vote for me in `term` (my term + 1, not taken yet)?"""

    term: int
    candidate: str
    last_index: int
    last_term: int


@dataclass(frozen=True, slots=True)
class PreVoteReply:
    term: int  # the term asked about, or the voter's own when it is higher
    voter: str
    granted: bool


@dataclass(frozen=True, slots=True)
class RequestVote:
    term: int
    candidate: str
    last_index: int
    last_term: int
    transfer: bool = False  # a leader handed over (TimeoutNow): vote even within a lease


@dataclass(frozen=True, slots=True)
class VoteReply:
    term: int
    voter: str
    granted: bool


@dataclass(frozen=True, slots=True)
class Append:
    """The leader's beat (AppendEntries with no entries): `commit`, the offset a majority
    of the group holds."""

    term: int
    leader: str
    commit: int


@dataclass(frozen=True, slots=True)
class AppendReply:
    term: int
    follower: str
    success: bool
    match: int  # where the follower's log ends (success)


@dataclass(frozen=True, slots=True)
class TimeoutNow:
    """The leader hands over: start an election now."""

    term: int
    leader: str


Message = PreVote | PreVoteReply | RequestVote | VoteReply | Append | AppendReply | TimeoutNow
