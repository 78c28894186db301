"""A broadcast consumer's own offsets, in a file it names (client.consumer).

A broadcast instance (RocketMQ's BROADCASTING) reads every queue as every other
instance of its group does, so the group's offsets on the brokers are not its
own: it keeps them here, written at most once a second and on close (a crash
reads up to a second again), atomically (a crash mid-write leaves the last
whole file).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

from broker_core.fsutil import write_json_atomic

log = logging.getLogger("floodgate.consumer")

SAVE_OFFSETS_S = 1.0  # written at most this often

Queue = tuple[str, int]  # (broker or group, queue id)


class OffsetsFile:
    def __init__(self, path: str | os.PathLike, group: str, topic: str, client_id: str,
                 clock: Callable[[], float]) -> None:
        self.path = Path(path)
        self.group, self.topic, self.client_id = group, topic, client_id
        self._clock = clock
        self._save_at = 0.0
        self.saved: dict[Queue, int] = self._read()  # as the file holds them

    def _read(self) -> dict[Queue, int]:
        """The offsets the file holds ({} when there is none yet); ValueError, one line,
        when it cannot be read or belongs to another group or topic."""
        if not self.path.exists():
            return {}
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
            if doc.get("group") != self.group or doc.get("topic") != self.topic:
                raise ValueError(f"it holds group {doc.get('group')!r} topic "
                                 f"{doc.get('topic')!r}, not {self.group!r} {self.topic!r}")
            return {(str(b), int(q)): int(o) for b, queues in doc["offsets"].items()
                    for q, o in queues.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"offsets file {self.path}: unreadable ({exc})") from None

    def save(self, committed: dict[Queue, int], force: bool = False) -> None:
        """Write `committed` if it changed, at most once every SAVE_OFFSETS_S unless
        `force`. A failed write is logged: the next save tries again."""
        if not force and self._clock() < self._save_at:
            return
        self._save_at = self._clock() + SAVE_OFFSETS_S
        if committed == self.saved:
            return
        offsets: dict[str, dict[str, int]] = {}
        for (b, q), o in sorted(committed.items()):
            offsets.setdefault(b, {})[str(q)] = o
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.path, {"group": self.group, "topic": self.topic,
                                          "client_id": self.client_id, "offsets": offsets})
        except OSError as exc:  # at least once: read again from the last saved offsets
            log.warning("%s: offsets not saved to %s: %s", self.group, self.path, exc)
            return
        self.saved = dict(committed)
