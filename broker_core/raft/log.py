"""What a Raft node keeps across a crash: its term and vote, and its log.

`RaftStorage` is the contract the core (raft.node) writes through: `save_vote`
returns only once the term and vote are durable (the core never answers or acts on
a term it has not saved), `append` and `truncate` change the log. `MemoryStorage`
keeps it all in memory: the simulator's nodes "crash" by losing everything but it.
A broker's storage keeps the vote in a file and the log in its CommitLog.

Membership (thesis chapter 4): the group's voters are the latest configuration entry
in the log (committed or not), else the one a snapshot carried, else the bootstrap
members saved the first time the node started (its flags are not read again: a
restarted member must not take a list that changed since as its configuration).
A snapshot (thesis 5.3) is the store up to a committed entry, sent as bytes: `end`
long, read at offsets; a member that falls before its leader's first entry, or joins
empty, installs one.
"""

from __future__ import annotations

import json
import math
from typing import Protocol

from broker_core.raft.messages import Entry


class RaftStorage(Protocol):
    term: int
    voted_for: str | None

    def save_vote(self, term: int, voted_for: str | None) -> None: ...

    def last_index(self) -> int: ...

    def term_at(self, index: int) -> int:
        """The term of the entry at `index` (0 for index 0, before the first)."""
        ...

    def entries(self, first: int, last: int, max_bytes: float = math.inf) -> list[Entry]:
        """Entries first..last, inclusive (those that exist), stopping before one that
        would take their data past `max_bytes` (the first always comes)."""
        ...

    def append(self, entries: list[Entry]) -> None:
        """After the last entry, in order."""
        ...

    def truncate(self, index: int) -> None:
        """Drop the entries at and after `index` (a follower's tail the leader lacks)."""
        ...

    def first_index(self) -> int:
        """The first entry held (those before it are only in a snapshot)."""
        ...

    def config(self, upto: int | None = None) -> tuple[int, tuple[str, ...] | None]:
        """(the index of the configuration in force, its members; None: none known),
        as of entry `upto` (default: the last)."""
        ...

    def set_bootstrap(self, members: tuple[str, ...]) -> None:
        """The first start's members: kept, unless a configuration is already known."""
        ...

    def snapshot_size(self, index: int) -> tuple[int, int]:
        """(start, end): the offsets of a snapshot of the entries up to committed `index`."""
        ...

    def snapshot_read(self, index: int, offset: int, size: int) -> bytes:
        """LookupError: the bytes are gone (compacted meanwhile): start again."""
        ...

    def install(self, index: int, start: int, offset: int, data: bytes, end: int) -> int:
        """A chunk of a snapshot of entries up to `index` ([start, end) long); returns
        the offset it takes next (-1: it cannot take this snapshot)."""
        ...

    def install_done(self, index: int, term: int, members: tuple[str, ...], end: int) -> None:
        """The snapshot is whole: the log now starts after `index` (of `term`)."""
        ...


class MemoryStorage:
    def __init__(self) -> None:
        self.term = 0
        self.voted_for: str | None = None
        self.log: list[Entry] = []  # every entry, compacted ones too (for the checker)
        self.first = 1  # entries before it are compacted: only a snapshot carries them
        self.base_members: tuple[str, ...] | None = None  # a snapshot's configuration
        self.bootstrap: tuple[str, ...] | None = None
        self.saves = 0  # how many votes were saved (a test counts the disk writes)
        self._blobs: dict[int, bytes] = {}  # snapshots being sent, by index
        self._taking: tuple[int, bytearray] | None = None  # a snapshot being installed

    def save_vote(self, term: int, voted_for: str | None) -> None:
        self.term, self.voted_for = term, voted_for
        self.saves += 1

    def last_index(self) -> int:
        return len(self.log)

    def term_at(self, index: int) -> int:
        return self.log[index - 1].term if 0 < index <= len(self.log) else 0

    def entries(self, first: int, last: int, max_bytes: float = math.inf) -> list[Entry]:
        out = self.log[max(first, self.first) - 1:last]
        size = 0
        for k, e in enumerate(out):
            size += len(e.data)
            if size > max_bytes and k:
                return out[:k]
        return out

    def append(self, entries: list[Entry]) -> None:
        for e in entries:
            if e.index != len(self.log) + 1:
                raise ValueError(f"entry {e.index} appended after {len(self.log)}")
            self.log.append(e)

    def truncate(self, index: int) -> None:
        del self.log[index - 1:]

    def first_index(self) -> int:
        return self.first

    def compact(self, index: int) -> None:
        """Forget entries up to `index` (committed): a follower behind it needs a snapshot."""
        self.first = max(self.first, min(index, len(self.log)) + 1)

    def config(self, upto: int | None = None) -> tuple[int, tuple[str, ...] | None]:
        for e in reversed(self.log[:upto]):
            if e.members is not None:
                return e.index, e.members
        if self.base_members is not None:
            return self.first - 1, self.base_members
        return 0, self.bootstrap

    def set_bootstrap(self, members: tuple[str, ...]) -> None:
        if self.config()[1] is None:
            self.bootstrap = tuple(members)

    def snapshot_size(self, index: int) -> tuple[int, int]:
        if index not in self._blobs:
            self._blobs[index] = json.dumps([[e.term, e.data.hex(), e.members]
                                             for e in self.log[:index]]).encode()
        return 0, len(self._blobs[index])

    def snapshot_read(self, index: int, offset: int, size: int) -> bytes:
        if index not in self._blobs:
            raise LookupError(f"no snapshot at {index}")
        return self._blobs[index][offset:offset + size]

    def install(self, index: int, start: int, offset: int, data: bytes, end: int) -> int:
        if self._taking is None or self._taking[0] != index:
            self._taking = (index, bytearray())
        buf = self._taking[1]
        if offset == len(buf):
            buf += data
        return len(buf)

    def install_done(self, index: int, term: int, members: tuple[str, ...], end: int) -> None:
        rows = json.loads(bytes(self._taking[1]))
        self._taking = None
        self.log = [Entry(t, i + 1, bytes.fromhex(d), tuple(m) if m is not None else None)
                    for i, (t, d, m) in enumerate(rows)]
        if self.log and self.log[-1].term != term:
            raise ValueError(f"snapshot of {index} ends with term {self.log[-1].term}, "
                             f"not {term}")
        self.first, self.base_members = index + 1, tuple(members)
