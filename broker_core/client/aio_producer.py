"""The producer for asyncio code: the same sends, retries and fuse as
`broker_core.client.Producer` (one `SendPlan` for both), on the caller's event
loop with no threads.

`Producer.send_async` serves asyncio too (through `asyncio.wrap_future`), but
every answer then crosses from a reader thread to the loop; at ten thousand
sends a second that hand-off is the bottleneck, so asyncio services use this.

`send` is a coroutine; `send_nowait` takes a callback instead and creates no task:
each attempt is a request whose answer calls back (`aio_connection`: timeouts swept
per connection, no timer per request), which is what a load generator wants at
thousands of sends a second (a task per send was most of its CPU).

    async with AsyncProducer(["127.0.0.1:10911"]) as producer:
        result = await producer.send("orders", b"...", tags="paid")
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Mapping, Sequence

from broker_core.acl import credentials, tls
from broker_core.acl.handshake import AuthFailed
from broker_core.client.aio_connection import AioConnection, authenticate
from broker_core.client.attempts import (
    FLOW_RETRIES,
    SendCounters,
    SendFailed,
    SendOptions,
    SendPlan,
    SendResult,
    with_group,
)
from broker_core.client.connection import BrokerUnavailable, Connection, parse_addr
from broker_core.client.idempotence import Idempotence
from broker_core.client.ordering import OrderedQueues, choose
from broker_core.client.producer import encode_many, encode_one
from broker_core.client.producer_setup import producer_brokers, release_resynced
from broker_core.client.tracing import traced_properties
from broker_core.client.turn_batch import MAX_MULTI, TurnBatcher
from broker_core.errors import BrokerError
from broker_core.protocol import (
    Code,
    Op,
    OutMessage,
    decode_json,
    encode_json,
    encode_send,
)
from broker_core.protocol.delay import PROP_DELAY, with_delay
from broker_core.protocol.multi import encode_message
from broker_core.protocol.transactions import PROP_TX_HALF
from broker_core.trace.records import TRACE_TOPIC, now_ms

# How often the producer's loop proves to its fuse that it is running (fuse.lateness):
# often enough that a stalled loop is seen within a few ms. Only while calls are in
# flight, the only time the fuse needs it: an idle producer beat 200 times a second.
HEARTBEAT_S = 0.005


class AsyncProducer:
    """`routes` (a replicated cluster, e.g. `ha.routes.ZkRoutes`): brokers are its
    groups, each reached at its current master; a failover is picked up at the next
    send and the group's fuse state starts afresh (a new broker answers for it).
    `group`, `flow_retries`, `backoff`: as `Producer`'s (`client.attempts.SendOptions`);
    `counters`: share a producer's throttling figures (the load generator does).
    `tracer`: a `client.tracing.SendTracer` (e.g. a `Producer`'s) that samples sends
    for the trace, as `Producer(trace_rate=...)` does. `linger_s`: how long a send
    waits for others to ride its frame (client.turn_batch; 0: the turn it was made in);
    `frame_msgs`: a frame leaves once it holds that many (Kafka's batch.size)."""

    def __init__(self, brokers: Sequence[str] | Mapping[str, str] | str | None = None,
                 fuse=None, timeout: float = 3.0, retries: int | None = None,
                 clock: Callable[[], float] = time.monotonic, routes=None, group: str = "",
                 flow_retries: int = FLOW_RETRIES, backoff: Sequence[float] = (),
                 counters: SendCounters | None = None, tracer=None, credentials=None,
                 linger_s: float = 0.0, frame_msgs: int = MAX_MULTI,
                 idempotent: bool = True, deadline_s: float | None = None) -> None:
        self.routes = routes
        # a retry of a send whose answer was lost is not stored twice (client.idempotence)
        self.idempotence = Idempotence() if idempotent else None
        self.credentials = credentials  # acl.credentials (None: FLOODGATE_CREDENTIALS)
        self.tracer = tracer
        self._routes_changes = routes.changes if routes is not None else 0
        self.brokers, self.fuse = producer_brokers(brokers, routes, fuse, clock, credentials)
        self.timeout = timeout
        self.options = SendOptions(retries, flow_retries, tuple(backoff), group, deadline_s)
        self._clock = clock
        self.counters = counters if counters is not None else SendCounters()
        self._names = list(self.brokers)
        self._ordered = OrderedQueues(lambda: self._names, self._route)
        self._rr = itertools.count()
        self._conns: dict[str, AioConnection] = {}
        self._connecting: dict[str, asyncio.Lock] = {}
        self._closing = False
        self._heartbeat: asyncio.TimerHandle | None = None
        # sends waiting out a FLOW_CONTROL backoff: timer -> their `done`, failed at close
        self._backing_off: dict[asyncio.TimerHandle, object] = {}
        self._sent = False  # a call started since the last beat
        # the sends of one turn of the loop, one frame a topic (SEND_MULTI)
        self.batcher = TurnBatcher(self._call_nowait, frame_msgs, linger_s)
        self._trace_sender: AsyncProducer | None = None  # the tracer's, on this loop

    def _beat(self) -> None:
        """The loop ran: tell the fuse (its lateness excuses the brokers) and let it
        judge calls in flight from this thread, the one that reads their answers. With
        none in flight and none started since the last beat, the beats rest until the
        next call (the gap is not the client's lateness: nothing was waiting)."""
        fuse = self.fuse
        fuse.heartbeat(HEARTBEAT_S)
        fuse.tick()
        self._heartbeat = None
        if self._closing:
            return
        if self._sent or fuse.calls_in_flight:
            self._sent = False
            self._heartbeat = asyncio.get_running_loop().call_later(HEARTBEAT_S, self._beat)
        else:
            fuse.rest()

    def _rest(self) -> None:
        """The last call in flight was answered: this read is the loop's beat, and the
        beats rest from here (a paced producer's next beat, 5 ms on, was a wake-up a
        send for nothing to judge)."""
        self._heartbeat.cancel()
        self._heartbeat = None
        self._sent = False
        self.fuse.heartbeat(HEARTBEAT_S)
        self.fuse.rest()

    def _reroute(self) -> None:
        """The routes moved: follow each group to its master (a failover), and let back
        a group whose master has a slave in sync again."""
        self._routes_changes = self.routes.changes
        for group, addr in self.routes.masters().items():
            if addr == self.brokers.get(group):
                continue
            self.brokers[group] = addr
            conn = self._conns.pop(group, None)
            if conn is not None and conn.transport is not None:
                conn.transport.close()
            if self.fuse is not None:  # judged as the dead master: forget it
                self.fuse.remove_broker(group)
                self.fuse.add_broker(group)
        if self.fuse is not None:
            release_resynced(self.fuse, self.routes)

    async def _conn(self, name: str) -> AioConnection:
        conn = self._conns.get(name)
        if conn is not None and conn.transport is not None:
            return conn
        async with self._connecting.setdefault(name, asyncio.Lock()):  # one connect at a time
            while True:
                conn = self._conns.get(name)
                if conn is not None and conn.transport is not None:
                    return conn
                addr = self.brokers[name]
                if not addr:
                    raise BrokerUnavailable(f"group {name} has no master")
                conn = await self._connect(addr)
                if self.brokers.get(name) == addr:
                    self._conns[name] = conn
                    return conn
                # the routes moved while it connected: a link kept to the old master took
                # every send of its group there (NOT_MASTER, 50 s in a chaos run)
                conn.transport.close()

    async def _connect(self, addr: str) -> AioConnection:
        host, port = parse_addr(addr)
        ctx = tls.client_context()
        try:
            _t, conn = await asyncio.wait_for(
                asyncio.get_running_loop().create_connection(
                    lambda: AioConnection(addr, self.timeout, ctx is not None), host, port,
                    ssl=ctx, server_hostname=host if ctx is not None else None),
                self.timeout)
        except (OSError, TimeoutError) as exc:  # wait_for's TimeoutError says nothing
            raise BrokerUnavailable(f"{addr}: {exc or f'no connection in {self.timeout:g} s'}"
                                    ) from None
        creds = self.credentials or credentials.default()
        if creds is not None:
            await authenticate(conn, creds)
        return conn

    async def connect(self) -> dict[str, BrokerUnavailable | AuthFailed]:
        """Connect and sign in to every broker now (the trace sender's too), so the first
        sends find their links open; returns the brokers not reached, with why (their
        sends try again, and the fuse judges those). A paced load that connected on its
        first sends fell behind by the handshakes and sent what fell due in one burst."""
        if self.tracer is not None and self._trace_sender is None:
            self._attach_trace()
        producers = [self] if self._trace_sender is None else [self, self._trace_sender]
        names = [(p, name) for p in producers for name in p.brokers]
        outcomes = await asyncio.gather(*(p._conn(name) for p, name in names),
                                        return_exceptions=True)
        problems = {}
        for (_p, name), out in zip(names, outcomes, strict=True):
            if isinstance(out, BrokerUnavailable | AuthFailed):
                problems[name] = out
            elif isinstance(out, BaseException):
                raise out
        return problems

    def _call_nowait(self, op: Op, payload: bytes,
                     done: Callable[[SendResult | None, BaseException | None], None],
                     pinned: str | None = None) -> None:
        """Start a send's attempts; `done(result, None)` or `done(None, SendFailed)`.
        `pinned`: every attempt to this broker only (an ordered send's queue)."""
        self._sent = True
        if self._heartbeat is None and self.fuse is not None and not self._closing:
            self._beat()
        if self.routes is not None and self.routes.changes != self._routes_changes:
            self._reroute()
        plan = SendPlan(self.fuse, [pinned] if pinned else self._names, self.options, op,
                        self._rr, self.counters, ident=self.idempotence, clock=self._clock)
        self._attempt(plan, payload, done)

    def _attempt(self, plan: SendPlan, payload: bytes, done) -> None:
        if self.routes is not None and self.routes.changes != self._routes_changes:
            self._reroute()  # (a retry follows a master that moved meanwhile)
        broker = plan.next()
        conn = self._conns.get(broker)
        if conn is None or conn.transport is None:  # connect first: the one await
            asyncio.ensure_future(self._connect_then(broker, plan, payload, done))
        else:
            self._request(conn, plan, payload, done)

    async def _connect_then(self, broker: str, plan: SendPlan, payload: bytes, done) -> None:
        try:
            conn = await self._conn(broker)
        except BrokerUnavailable as exc:  # (never written)
            self._settle(plan, payload, done, None, None, str(exc), written=False)
        except AuthFailed as exc:  # (the send waited for ever, the error unread in a task)
            done(None, plan.unauthenticated(exc))
        else:
            self._request(conn, plan, payload, done)

    def _request(self, conn: AioConnection, plan: SendPlan, payload: bytes, done) -> None:
        def answered(code: int | None, body: bytes | None, why: str) -> None:
            self._settle(plan, payload, done, None if code is None else Code(code), body, why)
            if self._heartbeat is not None and not self.fuse.calls_in_flight:
                self._rest()

        flags, body = plan.frame(payload)
        try:
            conn.request(plan.op, body, answered, flags)
        except BrokerUnavailable as exc:  # (not connected: never written)
            self._settle(plan, payload, done, None, None, str(exc), written=False)

    def _settle(self, plan: SendPlan, payload: bytes, done, code: Code | None,
                body: bytes | None, reason: str, written: bool = True) -> None:
        kind, value = plan.answer(code, body, reason, self._closing, written)
        if kind == "ok":
            done(value, None)
        elif kind == "fail":
            done(None, value)
        elif kind == "backoff":
            def again() -> None:
                self._backing_off.pop(timer, None)
                self._attempt(plan, payload, done)

            timer = asyncio.get_running_loop().call_later(value, again)
            self._backing_off[timer] = done
        else:
            self._attempt(plan, payload, done)

    async def _call(self, op: Op, payload: bytes) -> SendResult:
        fut = asyncio.get_running_loop().create_future()

        def done(result, exc) -> None:
            if not fut.done():
                fut.set_exception(exc) if exc is not None else fut.set_result(result)

        self._call_nowait(op, payload, done)
        return await fut

    async def send(self, topic: str, body: bytes, tags: str | None = None,
                   keys: str | None = None, properties: dict[str, str] | None = None,
                   delay: float | str | None = None, order_key: str | None = None,
                   allow_reorder: bool = False) -> SendResult:
        """`delay`, `order_key`, `allow_reorder`: as Producer.send takes them."""
        properties = with_delay(properties, delay)
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def done(result, exc) -> None:
            if not fut.done():
                fut.set_exception(exc) if exc is not None else fut.set_result(result)

        if order_key is None:
            self.send_nowait(topic, body, done, tags, keys, properties)
            return await fut
        queues = self._ordered.cached(topic)
        if queues is None:  # ROUTE each broker, off the loop (once per ROUTES_TTL_S)
            queues = await loop.run_in_executor(None, self._ordered.queues, topic)
        excluded = self.fuse.excluded if self.fuse is not None else frozenset()
        broker, qid = choose(queues, order_key, excluded, allow_reorder)
        self._call_nowait(Op.SEND, encode_send(topic, qid, OutMessage(
            body, tags or "", keys or "", with_group(properties, self.options.group) or {})),
            done, pinned=broker)
        return await fut

    def _route(self, broker: str, topic: str) -> int:
        """ROUTE (creating the topic, as a send would) on a connection of its own: an
        executor thread's, not the loop's."""
        conn = Connection(self.brokers[broker], connect_timeout=self.timeout,
                          credentials=self.credentials)
        try:
            code, body = conn.call(Op.ROUTE, encode_json({"topic": topic, "create": True}),
                                   self.timeout)
        finally:
            conn.close()
        if code == Code.TOPIC_NOT_EXIST:
            return 0
        if code != Code.OK:
            raise BrokerError(f"ROUTE answered {Code(code).name}")
        return int(decode_json(body)["queues"])

    def send_nowait(self, topic: str, body: bytes,
                    done: Callable[[SendResult | None, BaseException | None], None],
                    tags: str | None = None, keys: str | None = None,
                    properties: dict[str, str] | None = None) -> None:
        """Send without a task: `done(result, None)` or `done(None, SendFailed)` later,
        on this loop (at once when no broker can be asked)."""
        tr = self.tracer
        alone = properties is not None and (PROP_DELAY in properties
                                            or PROP_TX_HALF in properties)
        if tr is None or not tr.sampler.sample():
            props = with_group(properties, self.options.group)
            if alone:  # the broker keeps it aside: a SEND of its own
                self._call_nowait(Op.SEND, encode_one(topic, body, tags, keys, props), done)
            else:
                self.batcher.add(topic, encode_message(
                    OutMessage(body, tags or "", keys or "", props or {})), done)
            return
        if self._trace_sender is None:
            self._attach_trace()
        born, t0 = now_ms(), time.perf_counter()
        props = with_group(traced_properties(properties), self.options.group)

        def traced(result, exc) -> None:
            tr.record(topic, tags, keys, len(body), born, time.perf_counter() - t0, result,
                      exc=exc)
            done(result, exc)

        if alone:
            self._call_nowait(Op.SEND, encode_one(topic, body, tags, keys, props), traced)
        else:
            self.batcher.add(topic, encode_message(
                OutMessage(body, tags or "", keys or "", props or {})), traced)

    async def send_batch(self, topic: str, bodies: Sequence[bytes | OutMessage]) -> SendResult:
        return await self._call(Op.SEND_BATCH, encode_many(topic, bodies, self.options.group))

    def _attach_trace(self) -> None:
        """Send the tracer's batches from this loop, through a producer of their own
        (no fuse: a trace batch's RT must not judge a broker), not from its thread."""
        sender = self._trace_sender = AsyncProducer(
            dict(self.brokers) if self.routes is None else None, fuse=False, timeout=self.timeout,
            routes=self.routes, credentials=self.credentials)
        self.tracer.dispatcher.attach(
            lambda body, keys: sender.send(TRACE_TOPIC, body, keys=keys))

    async def close(self) -> None:
        if self._trace_sender is not None:
            await self.tracer.dispatcher.detach(self.timeout)
            await self._trace_sender.close()
            self._trace_sender = None
        self._closing = True
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        waiting, self._backing_off = self._backing_off, {}  # (a callback may send again)
        for timer, done in waiting.items():  # never sent again, as Producer's
            timer.cancel()
            done(None, SendFailed("producer closed while backing off", Code.FLOW_CONTROL))
        for conn in self._conns.values():
            if conn.transport is not None:
                conn.transport.close()
        self._conns.clear()

    async def __aenter__(self) -> AsyncProducer:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
