"""Raft frames: every message comes back as it was sent; a hello names the group and the
member; what is not a frame is refused plainly."""

from __future__ import annotations

import pytest

from broker_core.raft import wire
from broker_core.raft.messages import (
    Append,
    AppendReply,
    PreVote,
    PreVoteReply,
    RequestVote,
    TimeoutNow,
    VoteReply,
)

MESSAGES = [
    PreVote(7, "group-1-a", 1 << 40, 6), PreVoteReply(7, "b", True),
    PreVoteReply(8, "b", False), RequestVote(7, "c", 120, 6, transfer=True),
    VoteReply(7, "b", False), Append(7, "leader", 118), Append(7, "leader", -1),
    AppendReply(7, "b", True, 121), AppendReply(7, "b", False, 0), TimeoutNow(7, "a"),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_comes_back_as_sent(msg):
    frame = wire.encode(msg)
    (n,) = wire.LENGTH.unpack_from(frame, 0)
    assert n == len(frame) - wire.LENGTH.size
    assert wire.decode(frame[wire.LENGTH.size:])[2] == msg


def test_a_hello_names_the_group_and_the_member():
    frame = wire.hello("group-1", "group-1-b")
    assert wire.decode(frame[4:])[:2] == ("hello", {"group": "group-1", "name": "group-1-b"})


@pytest.mark.parametrize("body", [b"\x09", b"\x05\x00\x01", b"",
                                  b"\x06" + b"\x00" * 17 + b"\x05b"])
def test_what_is_not_a_frame_is_refused(body):
    with pytest.raises(wire.WireError):
        wire.decode(body)
