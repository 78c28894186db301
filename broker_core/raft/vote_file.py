"""A member's term and vote on disk: saved before they are used (Raft's rule: a vote
given, or a term taken, survives any crash that follows).

One small JSON file replaced atomically (fsutil.atomic_write: a temporary file,
fsync, rename, fsync of the directory), so a crash at any moment leaves the last
saved (term, vote) whole. A term never goes back: saving a lower one is a bug in
the caller, refused loudly rather than written.
"""

from __future__ import annotations

import json
from pathlib import Path

from broker_core.fsutil import atomic_write


class VoteFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.term, self.voted_for = 0, None
        if path.exists():
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
                self.term, self.voted_for = int(doc["term"]), doc.get("voted_for")
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}: not a Raft vote file ({exc}): a node that "
                                 "forgot its vote could vote twice; restore it or "
                                 "remove the node from its group") from None
        self.saves = 0

    def save_vote(self, term: int, voted_for: str | None) -> None:
        if term < self.term:
            raise ValueError(f"term {term} saved after {self.term}: terms never go back")
        atomic_write(self.path, json.dumps({"term": term, "voted_for": voted_for}).encode())
        self.term, self.voted_for = term, voted_for
        self.saves += 1
