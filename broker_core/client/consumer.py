"""Pull consumer in clustering mode (see broker_core/client.py for the producer).

Each member heartbeats every broker; the union of live members, sorted, and
the sorted list of (broker, queue) are split evenly (RocketMQ's averaging
allocation), so every queue has exactly one owner once heartbeats agree.
Offsets live on the brokers: `commit()` writes them, a new owner reads them.
Delivery is at-least-once: what was polled but not committed comes again
after a rebalance or a restart.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence

from broker_core.client.attempts import normalize_brokers
from broker_core.client.connection import BrokerUnavailable, ConnectionPool
from broker_core.errors import BrokerError
from broker_core.protocol import (
    Code,
    Op,
    PulledMessage,
    PullRequest,
    decode_json,
    decode_pull_response,
    encode_json,
    encode_pull,
)

HEARTBEAT_S = 2.0


def allocate(
    members: Sequence[str], queues: Sequence[tuple[str, int]], me: str
) -> list[tuple[str, int]]:
    """The queues `me` owns: contiguous even shares, the first ones one larger."""
    members, queues = sorted(members), sorted(queues)
    if me not in members or not queues:
        return []
    n, k = len(queues), len(members)
    i = members.index(me)
    size, extra = divmod(n, k)
    start = i * size + min(i, extra)
    return queues[start : start + size + (1 if i < extra else 0)]


class Consumer:
    """`routes` (a replicated cluster, e.g. `ha.routes.ZkRoutes`): queues are per group,
    read from the group's master, or from a slave while the master does not answer
    (offsets then live on that slave: they come from the master once a second).

    `trace_rate` (0..1, default off): the share of traced messages (those a producer
    sampled) whose delivery this consumer reports to the trace, with the time of the
    commit that covers it (broker_core.client.tracing.DeliveryTracer)."""

    def __init__(
        self,
        group: str,
        topic: str,
        brokers: Sequence[str] | Mapping[str, str] | str | None = None,
        client_id: str | None = None,
        timeout: float = 3.0,
        clock: Callable[[], float] = time.monotonic,
        routes=None,
        trace_rate: float = 0.0,
        trace=None,
    ) -> None:
        self.group, self.topic = group, topic
        self.routes = routes
        if routes is not None:
            brokers = {g: g for g in routes.groups}
        self.brokers = normalize_brokers(brokers)
        self.client_id = client_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.timeout = timeout
        self._clock = clock
        # with routes: one connection per broker address, whichever group member answers
        self._pool = ConnectionPool({} if routes is not None else self.brokers)
        self._owned: list[tuple[str, int]] = []
        self._offsets: dict[tuple[str, int], int] = {}  # next offset to pull
        self._committed: dict[tuple[str, int], int] = {}
        self._members: tuple[str, ...] = ()
        self._next_heartbeat = 0.0
        self._rr = 0
        self.tracer = self._own_trace = None
        if trace_rate > 0:
            from broker_core.client.tracing import DeliveryTracer
            from broker_core.trace.dispatcher import TraceDispatcher

            if trace is None:
                trace = self._own_trace = TraceDispatcher.for_brokers(
                    None if routes is not None else dict(self.brokers), routes=routes)
            self.tracer = DeliveryTracer(trace, trace_rate, group, self.client_id)

    # -- plumbing -----------------------------------------------------------
    def _call(self, broker: str, op: Op, body: bytes, timeout: float | None = None):
        timeout = timeout if timeout is not None else self.timeout
        if self.routes is None:
            return self._call_at(broker, op, body, timeout)
        last: BrokerUnavailable | None = None
        for addr in self.routes.replicas(broker):  # the master first, then its slaves
            self._pool.addrs.setdefault(addr, addr)
            try:
                return self._call_at(addr, op, body, timeout)
            except BrokerUnavailable as exc:
                last = exc
        raise last or BrokerUnavailable(f"group {broker}: no broker known")

    def _call_at(self, name: str, op: Op, body: bytes, timeout: float):
        try:
            return self._pool.get(name).call(op, body, timeout)
        except TimeoutError as exc:
            raise BrokerUnavailable(str(exc)) from None

    def _json(self, broker: str, op: Op, payload: dict) -> dict:
        code, body = self._call(broker, op, encode_json(payload))
        if code != Code.OK:
            raise BrokerError(f"{broker}: {Code(code).name}: {body.decode('utf-8', 'replace')}")
        return decode_json(body)

    # -- membership ---------------------------------------------------------
    def heartbeat(self, leave: bool = False) -> None:
        """Tell every broker we are alive; rebalance when the member set changed."""
        members: set[str] = set()
        queues: list[tuple[str, int]] = []
        for broker in self.brokers:
            try:
                answer = self._json(
                    broker,
                    Op.HEARTBEAT,
                    {
                        "client_id": self.client_id,
                        "group": self.group,
                        "topic": self.topic,
                        "leave": leave,
                    },
                )
            except (BrokerUnavailable, BrokerError):
                continue  # a broker that is down owns no queues we could pull anyway
            members.update(answer.get("members", []))
            queues.extend((broker, q) for q in range(int(answer.get("queues", 0))))
        self._next_heartbeat = self._clock() + HEARTBEAT_S
        if leave:
            return
        members.add(self.client_id)
        owned = allocate(sorted(members), queues, self.client_id)
        if owned != self._owned:
            self.commit()
            self._owned = owned
            self._offsets = {q: self._offsets[q] for q in owned if q in self._offsets}
        self._members = tuple(sorted(members))

    @property
    def assignment(self) -> list[tuple[str, int]]:
        return list(self._owned)

    @property
    def members(self) -> tuple[str, ...]:
        return self._members

    def _start_offset(self, queue: tuple[str, int]) -> int:
        broker, qid = queue
        answer = self._json(
            broker, Op.QUERY_OFFSET, {"group": self.group, "topic": self.topic, "queue_id": qid}
        )
        offset = int(answer.get("offset", -1))
        if offset < 0:  # no committed offset: consume from the first message kept
            offset = int(answer.get("min_offset", 0))
        self._committed[queue] = offset
        return offset

    # -- consuming ----------------------------------------------------------
    def poll(self, max_msgs: int = 32, timeout: float = 1.0) -> list[PulledMessage]:
        """Up to ``max_msgs`` messages from the owned queues, waiting up to ``timeout``."""
        deadline = self._clock() + timeout
        while True:
            if self._clock() >= self._next_heartbeat:
                self.heartbeat()
            owned = self._owned
            if owned:
                # one quick pass over every queue, then a long poll on the next one
                for _ in range(len(owned)):
                    msgs = self._pull(owned[self._rr % len(owned)], max_msgs, 0)
                    self._rr += 1
                    if msgs:
                        return msgs
            left = deadline - self._clock()
            if left <= 0:
                return []
            if owned:
                wait_ms = int(min(left, 0.2) * 1000)
                msgs = self._pull(owned[self._rr % len(owned)], max_msgs, wait_ms)
                self._rr += 1
                if msgs:
                    return msgs
            else:
                time.sleep(min(left, 0.1))

    def _pull(self, queue: tuple[str, int], max_msgs: int, wait_ms: int) -> list[PulledMessage]:
        broker, qid = queue
        try:
            if queue not in self._offsets:
                self._offsets[queue] = self._start_offset(queue)
            req = PullRequest(self.group, self.topic, qid, self._offsets[queue], max_msgs, wait_ms)
            code, body = self._call(
                broker, Op.PULL, encode_pull(req), self.timeout + wait_ms / 1000
            )
        except (BrokerUnavailable, BrokerError):
            return []
        if code not in (Code.OK, Code.PULL_NOT_FOUND):
            return []
        status, next_offset, min_offset, _max, msgs = decode_pull_response(body, self.topic, qid)
        if status == "OFFSET_TOO_SMALL":  # retention removed them: jump to the oldest kept
            next_offset = max(next_offset, min_offset)
        self._offsets[queue] = next_offset
        if msgs and self.tracer is not None:
            self.tracer.polled(broker, msgs)
        return msgs

    def commit(self) -> None:
        """Store the offsets of everything polled so far on the brokers."""
        for queue, offset in list(self._offsets.items()):
            if self._committed.get(queue) == offset:
                continue
            broker, qid = queue
            try:
                self._json(
                    broker,
                    Op.COMMIT_OFFSET,
                    {"group": self.group, "topic": self.topic, "queue_id": qid, "offset": offset},
                )
                self._committed[queue] = offset
                if self.tracer is not None:
                    self.tracer.committed(queue, offset)
            except (BrokerUnavailable, BrokerError):
                pass  # at-least-once: committed again next time

    def close(self) -> None:
        try:
            self.commit()
            self.heartbeat(leave=True)
        finally:
            self._pool.close()
            if self.tracer is not None:
                self.tracer.release_all()
            if self._own_trace is not None:
                self._own_trace.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
