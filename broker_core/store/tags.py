"""Tag filter expressions as RocketMQ consumers write them: "*", "TagA", "TagA || TagB"."""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.store.message import tag_hash


@dataclass(frozen=True)
class TagFilter:
    tags: frozenset[str]
    hashes: frozenset[int]

    @classmethod
    def parse(cls, expression: str | None) -> TagFilter | None:
        """None (match everything) for None, "" or "*"."""
        if expression is None:
            return None
        tags = frozenset(t.strip() for t in str(expression).split("||") if t.strip())
        if not tags or "*" in tags:
            return None
        return cls(tags, frozenset(tag_hash(t) for t in tags))

    def hash_matches(self, h: int) -> bool:
        """Cheap pre-check on the queue unit (collisions are settled by ``matches``)."""
        return h in self.hashes

    def matches(self, tags: str | None) -> bool:
        return tags in self.tags
