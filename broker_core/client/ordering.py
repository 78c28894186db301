"""Ordered sends: every message of a sharding key to the same queue (顺序消息).

RocketMQ's MessageQueueSelector by hash: the topic's queues over all its brokers
(or groups), in a fixed order (broker name, then queue id), and a key's queue is
`crc32(key) % n`. The order does not depend on the fuse or on which brokers answer
now, so a key's queue never moves silently: when its broker is isolated by the fuse
(or down), the send fails with ORDER_QUEUE_UNAVAILABLE rather than go to a queue
whose consumer would see the key's messages out of order. A producer that prefers
availability to order says `allow_reorder=True`: the key then goes to the next
queue, in the same fixed order, on a broker that takes sends. Queue counts come
from ROUTE (creating the topic as a send would) and are kept for ROUTES_TTL_S.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable, Iterable

from broker_core.client.attempts import SendFailed

ROUTES_TTL_S = 30.0
ORDER_QUEUE_UNAVAILABLE = "ORDER_QUEUE_UNAVAILABLE"


def key_slot(key: str, n: int) -> int:
    """The key's place among n queues (stable across processes: crc32, not hash())."""
    return zlib.crc32(key.encode("utf-8")) % n


class OrderedQueues:
    """topic -> its (broker, queue id) list in the fixed order, from `route(broker,
    topic) -> queues` (0: the topic is not on that broker), cached ROUTES_TTL_S."""

    def __init__(self, brokers: Callable[[], Iterable[str]],
                 route: Callable[[str, str], int],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._brokers, self._route, self._clock = brokers, route, clock
        self._cache: dict[str, tuple[float, tuple[tuple[str, int], ...]]] = {}
        self._lock = threading.Lock()

    def cached(self, topic: str) -> tuple[tuple[str, int], ...] | None:
        hit = self._cache.get(topic)
        return hit[1] if hit is not None and hit[0] > self._clock() else None

    def queues(self, topic: str) -> tuple[tuple[str, int], ...]:
        """The topic's queues (asking the brokers on a miss); SendFailed when none has it."""
        hit = self.cached(topic)
        if hit is not None:
            return hit
        found, why = [], []
        for broker in sorted(self._brokers()):
            try:
                n = self._route(broker, topic)
            except Exception as exc:  # noqa: BLE001 - a broker down: its queues are unknown
                why.append(f"{broker}: {exc}")
                continue
            found += [(broker, q) for q in range(n)]
        if why:  # a broker that did not answer would change n: no guess at its queues
            raise SendFailed(f"{ORDER_QUEUE_UNAVAILABLE}: cannot learn the queues of "
                             f"{topic!r} ({'; '.join(why)}): an ordered send needs all of them")
        if not found:
            raise SendFailed(f"{ORDER_QUEUE_UNAVAILABLE}: topic {topic!r} has no queue")
        result = tuple(found)
        with self._lock:
            self._cache[topic] = (self._clock() + ROUTES_TTL_S, result)
        return result

    def forget(self, topic: str) -> None:
        with self._lock:
            self._cache.pop(topic, None)


def choose(queues: tuple[tuple[str, int], ...], key: str, excluded: frozenset[str] | set[str],
           allow_reorder: bool) -> tuple[str, int]:
    """The key's (broker, queue id): its own, or with `allow_reorder` the next one on a
    broker not excluded; SendFailed when its broker is excluded and order is kept."""
    at = key_slot(key, len(queues))
    broker, qid = queues[at]
    if broker not in excluded:
        return broker, qid
    if not allow_reorder:
        raise SendFailed(f"{ORDER_QUEUE_UNAVAILABLE}: key {key!r} belongs to {broker} queue "
                         f"{qid}, isolated by the fuse; its messages are not moved to "
                         f"another queue (that would reorder them): retry later, or send "
                         f"with allow_reorder=True")
    for step in range(1, len(queues)):
        b, q = queues[(at + step) % len(queues)]
        if b not in excluded:
            return b, q
    return broker, qid  # every broker excluded: its own (the fuse's cap keeps some in)
