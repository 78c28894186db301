"""Raft frames: every message comes back as it was sent, an Append's entries byte for
byte; a hello names the group and the member; what is not a frame is refused plainly."""

from __future__ import annotations

import pytest

from broker_core.raft import wire
from broker_core.raft.messages import (
    Append,
    AppendReply,
    Entry,
    PreVote,
    PreVoteReply,
    RequestVote,
    TimeoutNow,
    VoteReply,
)

MESSAGES = [
    PreVote(7, "group-1-a", 120, 6), PreVoteReply(7, "b", True), PreVoteReply(8, "b", False),
    RequestVote(7, "c", 120, 6, transfer=True), VoteReply(7, "b", False),
    Append(7, "leader", 119, 6, (Entry(7, 120, b"\x00" * 300), Entry(7, 121, b"")), 118),
    Append(7, "leader", 121, 7, (), 121), AppendReply(7, "b", True, 121),
    AppendReply(7, "b", False, 3), TimeoutNow(7, "a"),
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


def test_the_largest_append_a_leader_sends_fits_a_link_frame():
    """An Append carries entries up to MAX_APPEND_BYTES, or one entry past it; the largest
    entry is a loop turn's puts past MAX_ENTRY_BYTES by one put, at most a client's frame.
    A frame past the link's limit closes the link (and is sent again the same way)."""
    from broker_core.protocol.frame import MAX_FRAME as CLIENT_FRAME
    from broker_core.raft.appender import MAX_ENTRY_BYTES
    from broker_core.raft.node import MAX_APPEND_BYTES

    largest_entry = MAX_ENTRY_BYTES + CLIENT_FRAME
    assert max(MAX_APPEND_BYTES, largest_entry) + 4096 <= wire.MAX_FRAME  # (+ headers)
