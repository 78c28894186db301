"""Raft messages on a TCP link between the members of a group.

    frame = length (4 bytes, big-endian) | header length (2) | header (JSON) | entry data

The header names the message and its fields; an Append's entries are listed there as
[term, index, bytes] and their data follows the header back to back (CommitLog bytes,
never re-encoded). A link opens with a hello naming the group and the sender, so a
member of another group, or a stranger, is refused before it is heard.
"""

from __future__ import annotations

import json
import struct

from broker_core.raft.messages import (
    Append,
    AppendReply,
    Entry,
    Message,
    PreVote,
    PreVoteReply,
    RequestVote,
    TimeoutNow,
    VoteReply,
)

LENGTH = struct.Struct(">I")
HEAD = struct.Struct(">H")
MAX_FRAME = 64 << 20  # an Append of 256 entries of a few hundred KiB at most

KINDS: dict[str, type] = {"prevote": PreVote, "prevote-reply": PreVoteReply,
                          "vote": RequestVote, "vote-reply": VoteReply, "append": Append,
                          "append-reply": AppendReply, "timeout-now": TimeoutNow}
NAMES = {cls: name for name, cls in KINDS.items()}


class WireError(ValueError):
    """A frame that is not a Raft message: the link is closed."""


def encode(msg: Message) -> bytes:
    if isinstance(msg, Append):
        head = {"k": "append", "term": msg.term, "leader": msg.leader,
                "prev_index": msg.prev_index, "prev_term": msg.prev_term,
                "commit": msg.commit, "e": [[e.term, e.index, len(e.data)] for e in msg.entries]}
        return _frame(head, [e.data for e in msg.entries])
    head = {"k": NAMES[type(msg)]}
    head.update((f, getattr(msg, f)) for f in msg.__dataclass_fields__)
    return _frame(head, [])


def hello(group: str, name: str) -> bytes:
    return _frame({"k": "hello", "group": group, "name": name}, [])


def _frame(head: dict, datas: list[bytes]) -> bytes:
    raw = json.dumps(head, separators=(",", ":")).encode()
    body = b"".join([HEAD.pack(len(raw)), raw, *datas])
    return LENGTH.pack(len(body)) + body


def decode(body: bytes) -> tuple[str, dict, Message | None]:
    """A frame's body (after its length): (kind, header, the message or None: a hello)."""
    try:
        (n,) = HEAD.unpack_from(body, 0)
        head = json.loads(body[HEAD.size:HEAD.size + n])
        kind = head.pop("k")
    except (struct.error, ValueError, KeyError, AttributeError, TypeError) as exc:
        raise WireError(f"not a Raft frame: {exc}") from None
    if kind == "hello":
        return kind, head, None
    cls = KINDS.get(kind)
    if cls is None:
        raise WireError(f"unknown Raft message {kind!r}")
    try:
        if cls is Append:
            at, entries = HEAD.size + n, []
            for term, index, size in head.pop("e"):
                entries.append(Entry(int(term), int(index), body[at:at + size]))
                at += size
            if at != len(body):
                raise WireError(f"append of {len(body)} bytes lists {at}")
            head["entries"] = tuple(entries)
        return kind, head, cls(**head)
    except (TypeError, ValueError) as exc:
        raise WireError(f"bad {kind}: {exc}") from None
