"""What a Raft node is at a moment (raft.stream_election steps it; raft.votes moves it)."""

from enum import Enum


class Role(Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre-candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"
