"""A member's configurations on disk (raft.membership): the bootstrap members of its
first start, the one its last snapshot carried, and each configuration entry of its
log by index. Configuration entries hold no CommitLog bytes (like a new leader's
no-op): their members live here, one small JSON file replaced atomically, written
before the entry's slot (so a slot never names a configuration not saved; one
saved past the last slot, a crash between the two, is dropped on load).
"""

from __future__ import annotations

import json
from pathlib import Path

from broker_core.errors import StoreCorruptError
from broker_core.fsutil import atomic_write


class ConfigFile:
    def __init__(self, path: Path, last_index: int, base_index: int) -> None:
        self.path = path
        self.bootstrap: tuple[str, ...] | None = None
        self.base: tuple[str, ...] | None = None  # in force at the log's base (a snapshot's)
        self.entries: dict[int, tuple[str, ...]] = {}
        if path.exists():
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
                boot, base = doc.get("bootstrap"), doc.get("base")
                self.bootstrap = tuple(boot) if boot is not None else None
                self.base = tuple(base) if base is not None else None
                self.entries = {int(i): tuple(m) for i, m in doc.get("entries", [])}
            except (ValueError, KeyError, TypeError) as exc:
                raise StoreCorruptError(f"{path}: not a Raft configuration file ({exc}): "
                                        "restore it, or empty this member's store and "
                                        "add it to its group again") from None
        stale = [i for i in self.entries if i > last_index or i <= base_index]
        if stale:
            for i in stale:
                del self.entries[i]
            self.save()

    def config(self, upto: int, base_index: int) -> tuple[int, tuple[str, ...] | None]:
        below = [i for i in self.entries if i <= upto]
        if below:
            return max(below), self.entries[max(below)]
        if self.base is not None:
            return base_index, self.base
        return 0, self.bootstrap

    def add(self, index: int, members: tuple[str, ...]) -> None:
        self.entries[index] = tuple(members)
        self.save()

    def cut(self, index: int) -> None:
        """Entries at and after `index` are gone from the log."""
        if any(i >= index for i in self.entries):
            self.entries = {i: m for i, m in self.entries.items() if i < index}
            self.save()

    def rebase(self, members: tuple[str, ...]) -> None:
        """A snapshot replaced the log: its configuration is the base, nothing after it."""
        self.base, self.entries = tuple(members), {}
        self.save()

    def save(self) -> None:
        atomic_write(self.path, json.dumps({
            "bootstrap": self.bootstrap, "base": self.base,
            "entries": sorted([i, list(m)] for i, m in self.entries.items())}).encode())
