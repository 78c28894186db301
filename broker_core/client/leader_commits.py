"""A consumer that reads from followers commits its offsets at each group's master.

A follower's (or a slave's) offsets table is its leader's copy: replaced by the next
one it adopts, so a commit stored there would be lost. When the pull that would carry a
commit goes to a follower, the commit goes to the master as a COMMIT_OFFSET of its own,
sent without waiting and read back at the consumer's next poll. One that fails is
simply not marked committed: the consumer's next commit carries it again (at least once).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future

from broker_core.client.connection import BrokerUnavailable
from broker_core.client.pool import ConnectionPool
from broker_core.errors import BrokerError
from broker_core.protocol import Code, Op, decode_json, encode_json

log = logging.getLogger("floodgate.consumer")


class LeaderCommits:
    def __init__(self, group: str, topic: str, pool: ConnectionPool, routes,
                 on_committed: Callable[[str, dict[int, int]], None]) -> None:
        self.group, self.topic, self._pool, self._routes = group, topic, pool, routes
        self.on_committed = on_committed
        self._inflight: list[tuple[str, dict[int, int], Future]] = []
        self.sent = self.failed = 0

    def send(self, broker: str, offsets: dict[int, int], reset: int) -> None:
        """Commit `offsets` of group `broker` at its master, answered at `collect`."""
        master = self._routes.master(broker)
        if not master:
            return  # no master now: committed again with the next commit
        self._pool.addrs.setdefault(master, master)
        body = encode_json({"group": self.group, "topic": self.topic, "reset": reset,
                            "offsets": {str(q): o for q, o in offsets.items()}})
        try:
            fut = self._pool.get(master).request(Op.COMMIT_OFFSET, body)
        except (BrokerUnavailable, BrokerError):
            self.failed += 1
            return
        self.sent += 1
        self._inflight.append((broker, offsets, fut))

    def collect(self) -> None:
        """The commits answered since: those stored are marked committed."""
        waiting = []
        for broker, offsets, fut in self._inflight:
            if not fut.done():
                waiting.append((broker, offsets, fut))
                continue
            try:
                code, body = fut.result()
                stale = code == Code.OK and bool(decode_json(body).get("stale"))
            except BrokerError:  # (unavailable, or an answer that is not JSON)
                code, stale = Code.SERVICE_NOT_AVAILABLE, True
            if code == Code.OK and not stale:
                self.on_committed(broker, offsets)
            else:
                self.failed += 1
                log.debug("%s: a commit at %s's master not stored (%s)", self.group, broker,
                          Code(code).name)
        self._inflight = waiting
