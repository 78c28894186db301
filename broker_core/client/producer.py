"""The threaded producer: `send` blocks, `send_async` returns a
`concurrent.futures.Future` (asyncio code awaits it with `asyncio.wrap_future`;
asyncio services use `AsyncProducer`, which needs no thread hand-off).

It switches broker on every send (the RocketMQ read-write article) through a `fuse.Fuse` (on by
default) and retries a failed send on another broker; the attempts follow
`client.attempts.SendPlan`, shared with the asyncio producer: retries,
FLOW_CONTROL backoff and the producer group brokers' quotas see
(`client.attempts.SendOptions`).
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future

from broker_core.acl.handshake import AuthFailed
from broker_core.client.attempts import (
    FLOW_RETRIES,
    SendCounters,
    SendFailed,
    SendOptions,
    SendPlan,
    SendResult,
    with_group,
)
from broker_core.client.connection import BrokerUnavailable, NotSent
from broker_core.client.idempotence import Idempotence
from broker_core.client.ordering import OrderedQueues, choose
from broker_core.client.pool import ConnectionPool
from broker_core.client.producer_setup import normalize_brokers, producer_brokers, release_resynced
from broker_core.client.sweeper import CallSweeper
from broker_core.client.tracing import SendTracer, traced_properties, traces
from broker_core.errors import BrokerError
from broker_core.protocol import (
    Code,
    Op,
    OutMessage,
    decode_json,
    encode_json,
    encode_send,
    encode_send_batch,
)
from broker_core.protocol.delay import with_delay
from broker_core.trace.dispatcher import TraceDispatcher
from broker_core.trace.records import TRACE_TOPIC, now_ms

__all__ = ["Producer", "SendFailed", "SendResult", "normalize_brokers"]


def encode_one(topic: str, body: bytes, tags, keys, properties) -> bytes:
    return encode_send(topic, -1, OutMessage(body, tags or "", keys or "", properties or {}))


def encode_many(topic: str, bodies: Sequence[bytes | OutMessage], group: str = "") -> bytes:
    msgs = [b if isinstance(b, OutMessage) else OutMessage(b) for b in bodies]
    if group:
        msgs = [OutMessage(m.body, m.tags, m.keys, with_group(m.properties, group)) for m in msgs]
    return encode_send_batch(topic, -1, msgs)


def client_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Producer:
    """`routes` (a replicated cluster, e.g. `ha.routes.ZkRoutes`): brokers are its
    groups, each reached at its current master (see AsyncProducer). `group`: the
    producer group brokers' quotas see; `flow_retries`, `backoff`, `deadline_s` (the
    retry budget as a time, 10 s by default) and `retries` (1 + `retries` attempts
    instead, RocketMQ's count, when given alone): see `client.attempts.SendOptions`.
    `idempotent` (default): a send is stored once though retried (client.idempotence);
    False: at least once.

    `trace_rate` (0..1, default off): the share of `send`s traced (broker_core.trace):
    they carry the TRACE property and their outcome goes to the trace topic, through
    `trace` (a TraceDispatcher) or one of the producer's own. Batches are not traced.
    """

    def __init__(
        self,
        brokers: Sequence[str] | Mapping[str, str] | str | None = None,
        fuse=None,
        timeout: float = 3.0,
        retries: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        routes=None,
        group: str = "",
        flow_retries: int = FLOW_RETRIES,
        backoff: Sequence[float] = (),
        trace_rate: float = 0.0,
        trace=None,
        client: str | None = None,
        credentials=None,
        idempotent: bool = True,
        deadline_s: float | None = None,
    ) -> None:
        self.routes = routes
        # a retry of a send whose answer was lost is not stored twice (client.idempotence)
        self.idempotence = Idempotence() if idempotent else None
        self.client_id = client or client_id()
        self._routes_changes = routes.changes if routes is not None else 0
        self.brokers, self.fuse = producer_brokers(brokers, routes, fuse, clock, credentials)
        self.timeout = timeout
        self.options = SendOptions(retries, flow_retries, tuple(backoff), group, deadline_s)
        self.counters = SendCounters()
        self._clock = clock
        self.credentials = credentials  # acl.credentials (None: FLOODGATE_CREDENTIALS)
        self._pool = ConnectionPool(self.brokers, credentials)
        self._ordered = OrderedQueues(lambda: self._names, self._route)
        self._rr = itertools.count()
        self._names = list(self.brokers)
        self._closed = threading.Event()
        self._reroute_lock = threading.Lock()
        # timeouts, backoffs and the fuse's ticks: a thread started by the first call
        self._sweeper = CallSweeper(self.fuse, clock, self._attempt)
        self.tracer: SendTracer | None = None
        self._own_trace = None
        if trace_rate > 0:
            if trace is None:
                trace = self._own_trace = trace_dispatcher(
                    None if routes is not None else dict(self.brokers), routes,
                    credentials=credentials)
            self.tracer = SendTracer(trace, trace_rate, self.client_id, self.fuse)

    # -- public API ---------------------------------------------------------
    def send(self, topic: str, body: bytes, tags: str | None = None, keys: str | None = None,
             properties: dict[str, str] | None = None, delay: float | str | None = None,
             order_key: str | None = None, allow_reorder: bool = False) -> SendResult:
        """Send one message, retrying on other brokers; raises SendFailed. The
        result's `msg_id` finds the message again (VIEW_BY_ID, `floodgate trace`).
        `delay`: one of RocketMQ's delay levels, in seconds or as a label ("5s", "1m":
        protocol.delay.LABELS); the message is stored now and reaches consumers then.
        `order_key`: every message of the key to the same queue (client.ordering), retried
        on that broker only; `allow_reorder`: to the next queue while its broker is
        isolated, instead of failing ORDER_QUEUE_UNAVAILABLE."""
        if order_key is not None:
            return self._send_ordered(topic, body, tags, keys, with_delay(properties, delay),
                                      order_key, allow_reorder)
        properties = with_delay(properties, delay)
        tr = self.tracer
        if tr is None or not traces(tr, properties):
            return self._call(Op.SEND, self._encode(topic, body, tags, keys, properties))
        born, t0 = now_ms(), time.perf_counter()
        payload = self._encode(topic, body, tags, keys, traced_properties(properties))
        try:
            result = self._call(Op.SEND, payload)
        except SendFailed as exc:
            tr.record(topic, tags, keys, len(body), born, time.perf_counter() - t0, exc=exc)
            raise
        tr.record(topic, tags, keys, len(body), born, time.perf_counter() - t0, result)
        return result

    def _send_ordered(self, topic, body, tags, keys, properties, key: str,
                      allow_reorder: bool) -> SendResult:
        queues = self._ordered.queues(topic)
        self._follow_routes()
        excluded = self.fuse.excluded if self.fuse is not None else frozenset()
        broker, qid = choose(queues, key, excluded, allow_reorder)
        payload = encode_send(topic, qid, OutMessage(
            body, tags or "", keys or "", with_group(properties, self.options.group) or {}))
        return self._call(Op.SEND, payload, pinned=broker)

    def send_to(self, broker: str, topic: str, queue_id: int, message: OutMessage) -> Future:
        """Send to one queue of one broker (or group), retried there only: a transform's
        output, which must stay in the broker group its input came from. A Future of
        its SendResult (SendFailed)."""
        payload = encode_send(topic, queue_id, OutMessage(
            message.body, message.tags, message.keys,
            with_group(message.properties, self.options.group) or {}))
        return self._start(Op.SEND, payload, pinned=broker)

    def queue_count(self, broker: str, topic: str) -> int:
        """How many queues `topic` has on `broker` (created, as a send would)."""
        self._follow_routes()
        return self._route(broker, topic)

    def request(self, broker: str, op: Op, payload: bytes,
                timeout: float | None = None) -> tuple[int, bytes]:
        """One request to `broker` (a name of this producer's), no retry elsewhere: the
        operations bound to where a message is (END_TRANSACTION, CHECK_TRANSACTION)."""
        self._follow_routes()
        return self._pool.get(broker).call(op, payload, timeout or self.timeout)

    def request_async(self, broker: str, op: Op, payload: bytes) -> Future:
        """`request` without waiting: a Future of (code, body); BrokerUnavailable when
        it cannot be sent. The caller forgets it on its own timeout (`forget`)."""
        self._follow_routes()
        return self._pool.get(broker).request(op, payload)

    def forget(self, broker: str, fut: Future) -> None:
        """A request_async answer no longer waited for."""
        self._pool.get(broker).forget(fut)

    def request_oneway(self, broker: str, op: Op, payload: bytes) -> None:
        """`request` without an answer (BrokerUnavailable when it cannot be sent)."""
        self._follow_routes()
        self._pool.get(broker).request(op, payload, oneway=True)

    @property
    def names(self) -> list[str]:
        """The brokers (or, with routes, the groups) this producer sends to."""
        return list(self._names)

    def _route(self, broker: str, topic: str) -> int:
        """ROUTE (creating the topic, as a send would): its queues on `broker`."""
        code, body = self._pool.get(broker).call(
            Op.ROUTE, encode_json({"topic": topic, "create": True}), self.timeout)
        if code == Code.TOPIC_NOT_EXIST:
            return 0
        if code != Code.OK:
            raise BrokerError(f"ROUTE answered {Code(code).name}")
        return int(decode_json(body)["queues"])

    def _encode(self, topic, body, tags, keys, properties) -> bytes:
        return encode_one(topic, body, tags, keys, with_group(properties, self.options.group))

    def send_async(self, topic: str, body: bytes, tags: str | None = None,
                   keys: str | None = None, properties: dict[str, str] | None = None,
                   delay: float | str | None = None) -> Future:
        """As send, without blocking: a Future of the SendResult."""
        properties = with_delay(properties, delay)
        tr = self.tracer
        if tr is None or not traces(tr, properties):
            return self._start(Op.SEND, self._encode(topic, body, tags, keys, properties))
        born, t0 = now_ms(), time.perf_counter()
        fut = self._start(Op.SEND, self._encode(topic, body, tags, keys,
                                                traced_properties(properties)))

        def done(f: Future) -> None:
            exc = f.exception()
            tr.record(topic, tags, keys, len(body), born, time.perf_counter() - t0,
                      None if exc else f.result(), exc)

        fut.add_done_callback(done)
        return fut

    def send_batch(self, topic: str, bodies: Sequence[bytes | OutMessage]) -> SendResult:
        return self._call(Op.SEND_BATCH, encode_many(topic, bodies, self.options.group))

    def send_batch_async(self, topic: str, bodies: Sequence[bytes | OutMessage]) -> Future:
        return self._start(Op.SEND_BATCH, encode_many(topic, bodies, self.options.group))

    def send_oneway(self, topic: str, body: bytes, tags: str | None = None) -> None:
        """Fire and forget: no answer, no retry, nothing reported to the fuse."""
        broker = self._choose(self._names)
        try:
            self._pool.get(broker).request(
                Op.SEND, self._encode(topic, body, tags, None, None), oneway=True)
        except BrokerUnavailable:
            pass

    def close(self) -> None:
        self._closed.set()
        waiting = self._sweeper.close()
        for *_, outer in waiting:  # backing off when the producer closed: never sent again
            if not outer.done():
                outer.set_exception(SendFailed("producer closed while backing off", Code.FLOW_CONTROL))
        self._pool.close()
        if self._own_trace is not None:
            self._own_trace.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- attempts -----------------------------------------------------------
    def _choose(self, candidates: list[str]) -> str:
        if self.fuse is not None:
            return self.fuse.choose(candidates)
        return candidates[next(self._rr) % len(candidates)]

    def _follow_routes(self) -> None:
        """Before a call and each retry: catch up with the routes if they moved (a
        lock-free int read). A send retried to a group whose master moved meanwhile
        went on knocking at the old one, NOT_MASTER until its deadline."""
        if self.routes is not None and self.routes.changes != self._routes_changes:
            with self._reroute_lock:  # retries run on several reader threads
                if self.routes.changes != self._routes_changes:
                    self._reroute()

    def _reroute(self) -> None:
        """The routes moved: follow each group to its master (a failover), and let back
        a group whose master has a slave in sync again."""
        self._routes_changes = self.routes.changes
        for group, addr in self.routes.masters().items():
            if addr != self.brokers.get(group):
                self.brokers[group] = addr
                self._pool.reroute(group, addr)
                if self.fuse is not None:  # judged as the dead master: forget it
                    self.fuse.remove_broker(group)
                    self.fuse.add_broker(group)
        if self.fuse is not None:
            release_resynced(self.fuse, self.routes)

    def _plan(self, op: Op, pinned: str | None = None) -> SendPlan:
        """`pinned`: every attempt to this broker only (an ordered send's queue)."""
        self._follow_routes()
        return SendPlan(self.fuse, [pinned] if pinned else self._names, self.options, op,
                        self._rr, self.counters, ident=self.idempotence, clock=self._clock)

    def _start(self, op: Op, payload: bytes, pinned: str | None = None) -> Future:
        outer: Future = Future()
        self._attempt(self._plan(op, pinned), payload, outer)
        return outer

    def _attempt(self, plan: SendPlan, payload: bytes, outer: Future) -> None:
        """One attempt without blocking: its answer arrives on a reader thread."""
        self._follow_routes()
        broker = plan.next()
        try:
            conn = self._pool.get(broker)
            flags, body = plan.frame(payload)
            fut = conn.request(plan.op, body, flags=flags)
        except BrokerUnavailable as exc:
            self._settle(plan, payload, outer, None, None, str(exc),
                         written=not isinstance(exc, NotSent))
            return
        except AuthFailed as exc:  # on a reader thread's retry it would be lost there
            outer.set_exception(plan.unauthenticated(exc))
            return
        self._sweeper.watch(fut, conn, self.timeout)
        fut.add_done_callback(lambda f: self._on_response(f, plan, payload, outer))

    def _on_response(self, fut: Future, plan: SendPlan, payload: bytes, outer: Future) -> None:
        self._sweeper.answered(fut)
        try:
            code, body = fut.result()
        except Exception as exc:  # noqa: BLE001 - BrokerUnavailable or timeout
            self._settle(plan, payload, outer, None, None, str(exc))
            return
        self._settle(plan, payload, outer, Code(code), body, "")

    def _settle(self, plan: SendPlan, payload: bytes, outer: Future, code: Code | None,
                body: bytes | None, reason: str, written: bool = True) -> None:
        kind, value = plan.answer(code, body, reason, self._closed.is_set(), written)
        if kind == "ok":
            outer.set_result(value)
        elif kind == "fail":
            outer.set_exception(value)
        elif kind == "backoff":  # the sweeper sends it again when its wait is over
            self._sweeper.later(value, plan, payload, outer)
        else:
            self._attempt(plan, payload, outer)

    def _call(self, op: Op, payload: bytes, pinned: str | None = None) -> SendResult:
        """The blocking path: the same plan, without callbacks, an outer future or
        the timeout sweeper (a sync send waits itself)."""
        plan = self._plan(op, pinned)
        while True:
            self._follow_routes()
            broker = plan.next()
            self._sweeper.wake()  # its fuse call is in flight now: judged meanwhile
            code = body = None
            reason = ""
            written = True
            try:
                flags, frame_body = plan.frame(payload)
                raw_code, body = self._pool.get(broker).call(op, frame_body, self.timeout,
                                                             flags)
                code = Code(raw_code)
            except (BrokerUnavailable, TimeoutError) as exc:
                reason = str(exc)
                written = not isinstance(exc, NotSent)
            except AuthFailed as exc:
                raise plan.unauthenticated(exc) from None
            kind, value = plan.answer(code, body, reason, self._closed.is_set(), written)
            if kind == "ok":
                return value
            if kind == "fail":
                raise value
            if kind == "backoff":
                time.sleep(value)


def trace_dispatcher(brokers=None, routes=None, credentials=None,
                     **kwargs) -> TraceDispatcher:
    """A dispatcher whose own producer (no fuse, no tracing: a trace batch's RT must not
    judge a broker) sends the trace batches to `brokers` (or `routes`' masters)."""
    producer = Producer(brokers, fuse=False, routes=routes, timeout=3.0,
                        credentials=credentials)
    return TraceDispatcher(lambda body, keys: producer.send(TRACE_TOPIC, body, keys=keys),
                           close=producer.close, **kwargs)
