"""Tag filter expressions as RocketMQ consumers write them: "*", "TagA", "TagA || TagB"."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from broker_core.protocol.record import tag_hash


@dataclass(frozen=True)
class TagFilter:
    tags: frozenset[str]
    hashes: frozenset[int]

    @staticmethod
    def parse(expression: str | None) -> TagFilter | None:
        """None (match everything) for None, "" or "*"."""
        if not expression:
            return None
        return _parse(expression)

    def hash_matches(self, h: int) -> bool:
        """Cheap pre-check on the queue unit (collisions are settled by ``matches``)."""
        return h in self.hashes

    def matches(self, tags: str | None) -> bool:
        return tags in self.tags


@lru_cache(maxsize=256)  # consumers send the same expression with every pull
def _parse(expression: str) -> TagFilter | None:
    tags = frozenset(t.strip() for t in str(expression).split("||") if t.strip())
    if not tags or "*" in tags:
        return None
    return TagFilter(tags, frozenset(tag_hash(t) for t in tags))
