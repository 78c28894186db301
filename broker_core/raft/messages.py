"""What Raft nodes say to each other (the Raft paper's RPCs, with the pre-vote of its
thesis, section 9.6, and TimeoutNow for a leadership transfer, section 3.10).

Plain frozen dataclasses: the core (raft.node) is pure, and a transport (in-process
for the simulator, TCP between brokers) carries them as it likes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Entry:
    term: int
    index: int
    data: bytes = b""  # b"": the no-op a new leader appends to commit its forebears' entries
    # a configuration (no data): the group's voting members from here on, each as its
    # name or NAME=HOST:PORT:RAFT_PORT (thesis 4.1: in force once appended, not committed)
    members: tuple[str, ...] | None = None


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
    """AppendEntries: `entries` follow (prev_index, prev_term); none is a heartbeat."""

    term: int
    leader: str
    prev_index: int
    prev_term: int
    entries: tuple[Entry, ...]
    commit: int


@dataclass(frozen=True, slots=True)
class AppendReply:
    term: int
    follower: str
    success: bool
    match: int  # success: the last index it now holds from the leader; else a hint:
    # where the leader should try next (the first index of the conflicting term)


@dataclass(frozen=True, slots=True)
class TimeoutNow:
    """The leader hands over: start an election now."""

    term: int
    leader: str


@dataclass(frozen=True, slots=True)
class Snapshot:
    """InstallSnapshot, one chunk: the leader's store up to entry `last_index`, bytes
    [offset, offset + len(data)) of [start, end) (thesis 5.3); `members`: the
    configuration in force at `last_index`."""

    term: int
    leader: str
    last_index: int
    last_term: int
    members: tuple[str, ...]
    start: int  # where the snapshot's bytes begin
    offset: int
    end: int
    data: bytes


@dataclass(frozen=True, slots=True)
class SnapshotReply:
    term: int
    follower: str
    last_index: int  # the snapshot it answers
    want: int  # the offset it takes next (== end: installed); -1: it cannot take it


Message = PreVote | PreVoteReply | RequestVote | VoteReply | Append | AppendReply | TimeoutNow \
    | Snapshot | SnapshotReply
