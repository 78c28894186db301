"""Raft messages on a TCP link between the members of a group.

    frame = length (4 bytes, big-endian, of what follows) | kind (1) | fields | names

Fixed fields are packed big-endian (terms and indexes as u64); each name (a member's)
follows as a length byte and its UTF-8 bytes. An Append lists its entries' [term,
index, size] after its fields and their data (CommitLog bytes, never re-encoded)
after its names, back to back; a configuration entry (`members`) sets the size's top
bit and carries its members as JSON in place of data. A Snapshot chunk carries its
members (JSON, length first) and then its bytes after its name. A link opens with a hello naming the group and the
sender, so a member of another group, or a stranger, is refused before it is heard.
(Binary, not JSON: a raft leader encodes an Append per follower per entry, and the
JSON headers were a tenth of its CPU.)
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
    Snapshot,
    SnapshotReply,
    TimeoutNow,
    VoteReply,
)

LENGTH = struct.Struct(">I")
MAX_FRAME = 64 << 20  # an Append of 256 entries of a few hundred KiB at most
HELLO = 0

# kind -> (class, fixed fields' struct, their names in order, the name fields)
_LAYOUT: dict[int, tuple[type, struct.Struct, tuple[str, ...], tuple[str, ...]]] = {
    1: (PreVote, struct.Struct(">QQQ"), ("term", "last_index", "last_term"), ("candidate",)),
    2: (PreVoteReply, struct.Struct(">QB"), ("term", "granted"), ("voter",)),
    3: (RequestVote, struct.Struct(">QQQB"), ("term", "last_index", "last_term", "transfer"),
        ("candidate",)),
    4: (VoteReply, struct.Struct(">QB"), ("term", "granted"), ("voter",)),
    5: (Append, struct.Struct(">QQQQH"), ("term", "prev_index", "prev_term", "commit", "n"),
        ("leader",)),
    6: (AppendReply, struct.Struct(">QQB"), ("term", "match", "success"), ("follower",)),
    7: (TimeoutNow, struct.Struct(">Q"), ("term",), ("leader",)),
    8: (Snapshot, struct.Struct(">QQQQQQ"), ("term", "last_index", "last_term", "start",
                                             "offset", "end"), ("leader",)),
    9: (SnapshotReply, struct.Struct(">QQq"), ("term", "last_index", "want"), ("follower",)),
}
_KIND = {cls: kind for kind, (cls, *_rest) in _LAYOUT.items()}
_APPEND, _REPLY, _REPLY_HEAD = _LAYOUT[5][1], _LAYOUT[6][1], bytes((6,))
_ENTRY = struct.Struct(">QQI")
_BOOLS = frozenset({"granted", "transfer", "success"})
CONFIG_BIT = 1 << 31  # an entry's size with it: a configuration, its members as JSON
_MEMBERS = struct.Struct(">I")


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
    if type(msg) is AppendReply:  # (one per entry per follower: no generic path)
        body = _REPLY_HEAD + _REPLY.pack(msg.term, msg.match, msg.success) + \
            _names(msg.follower)
        return LENGTH.pack(len(body)) + body
    kind = _KIND[type(msg)]
    _cls, fixed, fields, names = _LAYOUT[kind]
    if kind == 5:
        values = (msg.term, msg.prev_index, msg.prev_term, msg.commit, len(msg.entries))
        datas = [e.data if e.members is None else json.dumps(e.members).encode()
                 for e in msg.entries]
        head = fixed.pack(*values) + b"".join(
            _ENTRY.pack(e.term, e.index, len(d) | (CONFIG_BIT if e.members is not None else 0))
            for e, d in zip(msg.entries, datas, strict=True))
        body = b"".join([bytes((kind,)), head, _names(msg.leader), *datas])
    elif kind == 8:
        members = json.dumps(list(msg.members)).encode()
        body = b"".join([bytes((kind,)), fixed.pack(*(getattr(msg, f) for f in fields)),
                         _names(msg.leader), _MEMBERS.pack(len(members)), members, msg.data])
    else:
        body = bytes((kind,)) + fixed.pack(*(int(getattr(msg, f)) for f in fields)) + \
            _names(*(getattr(msg, n) for n in names))
    return LENGTH.pack(len(body)) + body


def hello(group: str, name: str) -> bytes:
    body = bytes((HELLO,)) + _names(group, name)
    return LENGTH.pack(len(body)) + body


def decode(body: bytes | memoryview) -> tuple[str, dict, Message | None]:
    """A frame's body (after its length): (kind, fields, the message or None: a hello).
    `fields` is what the generic path read (a hello's group and name); Append and
    AppendReply, the frames of every entry, are built directly and give none."""
    body = bytes(body)
    try:
        kind = body[0]
        if kind == 6:  # the commonest frames: built without the generic path's dicts
            term, match, success = _REPLY.unpack_from(body, 1)
            (follower,), at = _read_names(body, 1 + _REPLY.size, 1)
            if at != len(body):
                raise WireError(f"{len(body) - at} bytes after an AppendReply")
            return "AppendReply", {}, AppendReply(term, follower, bool(success), match)
        if kind == 5:
            return "Append", {}, _decode_append(body)
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
        if kind == 8:
            (size,) = _MEMBERS.unpack_from(body, at)
            values["members"] = _members(body[at + 4:at + 4 + size])
            values["data"] = body[at + 4 + size:]
            at = len(body)
        if at != len(body):
            raise WireError(f"{len(body) - at} bytes after a {cls.__name__}")
        for f in _BOOLS & values.keys():
            values[f] = bool(values[f])
        return cls.__name__, values, cls(**values)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise WireError(f"not a Raft frame: {exc}") from None


def _decode_append(body: bytes) -> Append:
    term, prev_index, prev_term, commit, n = _APPEND.unpack_from(body, 1)
    at = 1 + _APPEND.size
    heads = [_ENTRY.unpack_from(body, at + i * _ENTRY.size) for i in range(n)]
    (leader,), at = _read_names(body, at + n * _ENTRY.size, 1)
    entries = []
    for e_term, index, size in heads:
        config, size = size & CONFIG_BIT, size & ~CONFIG_BIT
        if at + size > len(body):
            raise WireError("an append's entries run past its frame")
        data = body[at:at + size]
        entries.append(Entry(e_term, index, b"", _members(data)) if config
                       else Entry(e_term, index, data))
        at += size
    if at != len(body):
        raise WireError(f"{len(body) - at} bytes after an Append")
    return Append(term, leader, prev_index, prev_term, tuple(entries), commit)


def _read_names(body: bytes, at: int, n: int) -> tuple[list[str], int]:
    out = []
    for _ in range(n):
        size = body[at]
        if at + 1 + size > len(body):
            raise WireError("a name runs past its frame")
        out.append(body[at + 1:at + 1 + size].decode())
        at += 1 + size
    return out, at


def _members(raw: bytes) -> tuple[str, ...]:
    try:
        members = json.loads(raw)
    except ValueError as exc:
        raise WireError(f"a configuration that is not JSON: {exc}") from None
    if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
        raise WireError(f"a configuration that is not a list of members: {members!r}")
    return tuple(members)
