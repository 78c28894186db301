"""Real stores for Raft tests: small segments, so that a test's records cross them."""

from __future__ import annotations

from broker_core.store import StoreConfig

SEGMENT = 64 << 10  # small segments (the least the largest record allows)


def config(**kw) -> StoreConfig:
    kw.setdefault("commitlog_segment_bytes", SEGMENT)
    kw.setdefault("max_message_bytes", 4 << 10)
    return StoreConfig(**kw)
