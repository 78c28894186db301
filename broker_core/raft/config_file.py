"""A member's configurations on disk (raft.stream_members): the bootstrap members of its
first start, and each configuration record of its log by the record's offset, in one
small JSON file replaced atomically. A configuration is saved before a byte of its
record is written or sent, so the log never holds a record whose members are unknown;
one saved past the log's end (a crash between the two) is dropped on load.
"""

from __future__ import annotations

import json
from pathlib import Path

from broker_core.errors import StoreCorruptError
from broker_core.fsutil import atomic_write


class ConfigFile:
    def __init__(self, path: Path, log_end: int) -> None:
        self.path = path
        self.bootstrap: tuple[str, ...] | None = None
        self.entries: dict[int, tuple[str, ...]] = {}  # record offset -> members
        if path.exists():
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
                boot = doc.get("bootstrap")
                self.bootstrap = tuple(boot) if boot is not None else None
                self.entries = {int(i): tuple(m) for i, m in doc.get("entries", [])}
            except (ValueError, KeyError, TypeError) as exc:
                raise StoreCorruptError(f"{path}: not a Raft configuration file ({exc}): "
                                        "restore it, or empty this member's store and "
                                        "add it to its group again") from None
        stale = [i for i in self.entries if i >= log_end]
        if stale:
            for i in stale:
                del self.entries[i]
            self.save()

    def config(self) -> tuple[int, tuple[str, ...] | None]:
        """(the offset of the last configuration held, its members): the bootstrap
        members at -1 when no record holds one (None: none known, a member joining)."""
        if self.entries:
            last = max(self.entries)
            return last, self.entries[last]
        return -1, self.bootstrap

    def add(self, offset: int, members: tuple[str, ...]) -> None:
        self.entries[offset] = tuple(members)
        self.save()

    def cut(self, offset: int) -> None:
        """Records at and after `offset` are gone from the log."""
        if any(i >= offset for i in self.entries):
            self.entries = {i: m for i, m in self.entries.items() if i < offset}
            self.save()

    def save(self) -> None:
        atomic_write(self.path, json.dumps({
            "bootstrap": self.bootstrap,
            "entries": sorted([i, list(m)] for i, m in self.entries.items())}).encode())
