"""JsonTable: how a broker keeps its small tables (topics, offsets, what RocketMQ
consumers hold, ...): a JSON file in the data dir, written through a temporary file,
fsync and an atomic rename, so a crash leaves the old or the new file, never half of
one; saved when it changed, off the event loop."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from broker_core.errors import BrokerError
from broker_core.fsutil import write_json_atomic

log = logging.getLogger("floodgate.broker")


def read_json(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BrokerError(f"{path}: unreadable ({exc}); move it aside to start empty") from None
    if not isinstance(data, dict):
        raise BrokerError(f"{path}: expected a JSON object")
    return data


class JsonTable:
    """A table the broker keeps as a JSON file, saved off its loop: the broker's tick
    `take`s what changed (on the loop) and a worker thread `write`s it (a write and
    two fsyncs on the loop held every send behind them for as long as the disk
    took: tens of ms while the CommitLog flushed, a hundred at start-up)."""

    path: Path
    _dirty = False
    version = 0  # bumped at each change: a master tells its slaves the tables when it moves

    @property
    def dirty(self) -> bool:
        """Changed since last taken (saved)."""
        return self._dirty

    @dirty.setter
    def dirty(self, value: bool) -> None:
        if value:
            self.version += 1
        self._dirty = value

    def document(self) -> dict:
        raise NotImplementedError

    def take(self) -> dict | None:
        """What to save, if anything changed (the table is clean from here on): a copy
        the loop can go on changing the table under."""
        if not self.dirty:
            return None
        self.dirty = False
        return self.snapshot()

    def snapshot(self) -> dict:
        """The table's state, cheap to take on the loop; `write` makes the document of it."""
        return self.document()

    def shaped(self, snapshot: dict) -> dict:
        """The document to write of a `snapshot` (on the worker thread)."""
        return snapshot

    def write(self, snapshot: dict) -> None:
        try:
            write_json_atomic(self.path, self.shaped(snapshot))
        except OSError as exc:
            self.dirty = True  # saved again next time
            log.warning("%s not saved: %s", self.path, exc)

    def save(self) -> None:
        """Save now, on this thread (closing; an operator's change that must be kept)."""
        doc = self.take()
        if doc is not None:
            self.write(doc)
