"""The epoch history: which master wrote which stretch of the CommitLog.

An entry (epoch, start) says: from physical offset `start` on, the log was
written by the master of `epoch` (RocketMQ 5's EpochFile). A broker appends
an entry when it becomes master; a slave adopts its master's history. Two
logs that share an entry hold the same bytes within that epoch up to where
the shorter of them ends, so comparing histories finds the last offset two
replicas agree on — and what a returning old master must cut.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from broker_core.errors import BrokerError
from broker_core.fsutil import write_json_atomic

Entry = tuple[int, int]  # (epoch, start offset)


class EpochError(BrokerError):
    pass


@dataclass
class EpochHistory:
    entries: list[Entry]

    @property
    def last_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else 0

    def begin(self, epoch: int, start: int) -> None:
        """This broker becomes master of `epoch` with its log ending at `start`.

        Entries starting above `start` describe bytes this log never held
        (adopted from a master it had not caught up with): they go.
        """
        if epoch < self.last_epoch:
            raise EpochError(f"epoch {epoch} is older than this log's {self.last_epoch}")
        kept = [(e, s) for e, s in self.entries if s <= start and e < epoch]
        self.entries = [*kept, (epoch, start)]

    def term_of_last_byte(self, log_end: int) -> int:
        """The epoch whose master wrote the last byte of a log ending at `log_end` (0:
        none): a master that began at the end and wrote nothing wrote no byte of it."""
        for epoch, start in reversed(self.entries):
            if start < log_end:
                return epoch
        return 0

    def end_of(self, index: int, log_end: int) -> int:
        """Where entry `index`'s stretch ends in a log that ends at `log_end`."""
        if index + 1 < len(self.entries):
            return min(self.entries[index + 1][1], log_end)
        return log_end

    def to_list(self) -> list[list[int]]:
        return [[e, s] for e, s in self.entries]

    @classmethod
    def from_list(cls, raw: object) -> EpochHistory:
        try:
            entries = [(int(e), int(s)) for e, s in raw]  # type: ignore[union-attr]
        except (TypeError, ValueError):
            raise EpochError(f"not an epoch history: {raw!r}") from None
        for (e1, s1), (e2, s2) in zip(entries, entries[1:], strict=False):
            if e2 <= e1 or s2 < s1:
                raise EpochError(f"epoch history out of order: {entries}")
        return cls(entries)


def consistent_end(mine: EpochHistory, my_end: int, theirs: EpochHistory, their_end: int) -> int:
    """The last offset up to which two logs hold the same bytes.

    Walk my entries from the newest: the first one the other history has too
    (same epoch, same start) was written by the same master in both logs, so
    they agree up to where the shorter of the two stretches ends. No shared
    entry: nothing is known to agree (offset 0; a slave starts over).
    """
    their_index = {entry: i for i, entry in enumerate(theirs.entries)}
    for i in range(len(mine.entries) - 1, -1, -1):
        j = their_index.get(mine.entries[i])
        if j is None:
            continue
        return min(mine.end_of(i, my_end), theirs.end_of(j, their_end))
    return 0


class EpochFile:
    """An EpochHistory kept in a JSON file (atomic rename, fsynced)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.history = self._load()

    def _load(self) -> EpochHistory:
        if not self.path.exists():
            return EpochHistory([])
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise EpochError(f"{self.path}: unreadable ({exc})") from None
        return EpochHistory.from_list(raw.get("entries", []) if isinstance(raw, dict) else raw)

    def save(self) -> None:
        write_json_atomic(self.path, {"entries": self.history.to_list()})

    def replace(self, history: EpochHistory) -> None:
        self.history = EpochHistory(list(history.entries))
        self.save()

    def begin(self, epoch: int, start: int) -> None:
        self.history.begin(epoch, start)
        self.save()
