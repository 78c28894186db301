"""What a Raft node keeps across a crash: its term and vote, and its log.

`RaftStorage` is the contract the core (raft.node) writes through: `save_vote`
returns only once the term and vote are durable (the core never answers or acts on
a term it has not saved), `append` and `truncate` change the log. `MemoryStorage`
keeps it all in memory: the simulator's nodes "crash" by losing everything but it.
A broker's storage keeps the vote in a file and the log in its CommitLog.
"""

from __future__ import annotations

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

    def entries(self, first: int, last: int) -> list[Entry]:
        """Entries first..last, inclusive (those that exist)."""
        ...

    def append(self, entries: list[Entry]) -> None:
        """After the last entry, in order."""
        ...

    def truncate(self, index: int) -> None:
        """Drop the entries at and after `index` (a follower's tail the leader lacks)."""
        ...


class MemoryStorage:
    def __init__(self) -> None:
        self.term = 0
        self.voted_for: str | None = None
        self.log: list[Entry] = []
        self.saves = 0  # how many votes were saved (a test counts the disk writes)

    def save_vote(self, term: int, voted_for: str | None) -> None:
        self.term, self.voted_for = term, voted_for
        self.saves += 1

    def last_index(self) -> int:
        return len(self.log)

    def term_at(self, index: int) -> int:
        return self.log[index - 1].term if 0 < index <= len(self.log) else 0

    def entries(self, first: int, last: int) -> list[Entry]:
        return self.log[max(first, 1) - 1:last]

    def append(self, entries: list[Entry]) -> None:
        for e in entries:
            if e.index != len(self.log) + 1:
                raise ValueError(f"entry {e.index} appended after {len(self.log)}")
            self.log.append(e)

    def truncate(self, index: int) -> None:
        del self.log[index - 1:]
