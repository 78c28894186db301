"""Raft messages on a TCP link between the members of a group.

    frame = length (4 bytes, big-endian, of what follows) | kind (1) | fields | names

Fixed fields are packed big-endian (terms and offsets as 8 bytes); each name (a
member's) follows as a length byte and its UTF-8 bytes. A link opens with a hello
naming the group and the sender, so that a member of another group, or a stranger, is
refused before it is heard. The log's bytes do not travel here (raft.messages).
"""

from __future__ import annotations

import struct

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

LENGTH = struct.Struct(">I")
MAX_FRAME = 4096  # a message is a few terms and offsets and a name or two
HELLO = 0

# kind -> (class, fixed fields' struct, their names in order, the name fields)
_LAYOUT: dict[int, tuple[type, struct.Struct, tuple[str, ...], tuple[str, ...]]] = {
    1: (PreVote, struct.Struct(">QqQ"), ("term", "last_index", "last_term"), ("candidate",)),
    2: (PreVoteReply, struct.Struct(">QB"), ("term", "granted"), ("voter",)),
    3: (RequestVote, struct.Struct(">QqQB"), ("term", "last_index", "last_term", "transfer"),
        ("candidate",)),
    4: (VoteReply, struct.Struct(">QB"), ("term", "granted"), ("voter",)),
    5: (Append, struct.Struct(">Qq"), ("term", "commit"), ("leader",)),
    6: (AppendReply, struct.Struct(">QqB"), ("term", "match", "success"), ("follower",)),
    7: (TimeoutNow, struct.Struct(">Q"), ("term",), ("leader",)),
}
_KIND = {cls: kind for kind, (cls, *_rest) in _LAYOUT.items()}
_BOOLS = frozenset({"granted", "transfer", "success"})


class WireError(ValueError):
    """A frame that is not a Raft message: the link is closed."""


def _names(*names: str) -> bytes:
    out = bytearray()
    for name in names:
        raw = name.encode()
        if len(raw) > 255:
            raise WireError(f"member name of {len(raw)} bytes")
        out.append(len(raw))
        out += raw
    return bytes(out)


def encode(msg: Message) -> bytes:
    kind = _KIND[type(msg)]
    _cls, fixed, fields, names = _LAYOUT[kind]
    body = bytes((kind,)) + fixed.pack(*(int(getattr(msg, f)) for f in fields)) + \
        _names(*(getattr(msg, n) for n in names))
    return LENGTH.pack(len(body)) + body


def hello(group: str, name: str) -> bytes:
    body = bytes((HELLO,)) + _names(group, name)
    return LENGTH.pack(len(body)) + body


def decode(body: bytes | memoryview) -> tuple[str, dict, Message | None]:
    """A frame's body (after its length): (kind, fields, the message or None: a hello)."""
    body = bytes(body)
    try:
        kind = body[0]
        if kind == HELLO:
            (group, name), _at = _read_names(body, 1, 2)
            return "hello", {"group": group, "name": name}, None
        layout = _LAYOUT.get(kind)
        if layout is None:
            raise WireError(f"unknown Raft message kind {kind}")
        cls, fixed, fields, names = layout
        values = dict(zip(fields, fixed.unpack_from(body, 1), strict=True))
        read, at = _read_names(body, 1 + fixed.size, len(names))
        values.update(zip(names, read, strict=True))
        if at != len(body):
            raise WireError(f"{len(body) - at} bytes after a {cls.__name__}")
        for f in _BOOLS & values.keys():
            values[f] = bool(values[f])
        return cls.__name__, values, cls(**values)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise WireError(f"not a Raft frame: {exc}") from None


def _read_names(body: bytes, at: int, n: int) -> tuple[list[str], int]:
    out = []
    for _ in range(n):
        size = body[at]
        if at + 1 + size > len(body):
            raise WireError("a name runs past its frame")
        out.append(body[at + 1:at + 1 + size].decode())
        at += 1 + size
    return out, at
