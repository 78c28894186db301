"""The producer for asyncio code: the same sends, retries and fuse as
`broker_core.client.Producer` (one `SendPlan` for both), on the caller's event
loop with no threads.

`Producer.send_async` serves asyncio too (through `asyncio.wrap_future`), but
every answer then crosses from a reader thread to the loop; at ten thousand
sends a second that hand-off is the bottleneck, so asyncio services use this.

    async with AsyncProducer(["127.0.0.1:10911"]) as producer:
        result = await producer.send("orders", b"...", tags="paid")
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Mapping, Sequence

from broker_core.client.attempts import (
    FLOW_RETRIES,
    SendCounters,
    SendFailed,
    SendOptions,
    SendPlan,
    SendResult,
    producer_brokers,
    with_group,
)
from broker_core.client.connection import BrokerUnavailable, parse_addr
from broker_core.client.producer import encode_many, encode_one
from broker_core.client.tracing import traced_properties
from broker_core.protocol import (
    FLAG_RESPONSE,
    Code,
    FrameDecoder,
    Op,
    OutMessage,
    ProtocolError,
    encode_frame,
)
from broker_core.trace.records import TRACE_TOPIC, now_ms


class _AioConnection(asyncio.Protocol):
    """One pipelined connection; answers resolve loop futures by request id."""

    def __init__(self, addr: str) -> None:
        self.addr = addr
        self.decoder = FrameDecoder()
        self.pending: dict[int, asyncio.Future] = {}
        self.transport: asyncio.Transport | None = None
        self.ids = itertools.count(1)

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.decoder.feed(data)
        except ProtocolError as exc:
            self._fail(f"{self.addr}: bad frame from broker: {exc}")
            return
        for header, body in frames:
            fut = self.pending.pop(header.request_id, None)
            if fut is not None and not fut.done() and header.flags & FLAG_RESPONSE:
                fut.set_result((header.code, body))

    def connection_lost(self, exc) -> None:
        self._fail(f"{self.addr}: connection lost" + (f": {exc}" if exc else ""))

    def _fail(self, reason: str) -> None:
        if self.transport is not None:
            self.transport.close()
        self.transport = None
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(BrokerUnavailable(reason))

    def expire(self, rid: int) -> None:
        """The request timed out: fail its future and forget it (a late answer is dropped)."""
        fut = self.pending.pop(rid, None)
        if fut is not None and not fut.done():
            fut.set_exception(TimeoutError(f"{self.addr}: no answer in time"))

    def request(self, op: int, body: bytes) -> tuple[int, asyncio.Future]:
        if self.transport is None or self.transport.is_closing():
            raise BrokerUnavailable(f"{self.addr}: not connected")
        rid = next(self.ids) & 0xFFFFFFFF
        fut = asyncio.get_running_loop().create_future()
        self.pending[rid] = fut
        self.transport.write(encode_frame(op, rid, body))
        return rid, fut


# How often the producer's loop proves to its fuse that it is running (fuse.lateness):
# often enough that a stalled loop is seen within a few ms, cheap at 200 timers/s.
HEARTBEAT_S = 0.005


class AsyncProducer:
    """`routes` (a replicated cluster, e.g. `ha.routes.ZkRoutes`): brokers are its
    groups, each reached at its current master; a failover is picked up at the next
    send and the group's fuse state starts afresh (a new broker answers for it).
    `group`, `flow_retries`, `backoff`: as `Producer`'s (`client.attempts.SendOptions`);
    `counters`: share a producer's throttling figures (the load generator does).
    `tracer`: a `client.tracing.SendTracer` (e.g. a `Producer`'s) that samples sends
    for the trace, as `Producer(trace_rate=...)` does."""

    def __init__(self, brokers: Sequence[str] | Mapping[str, str] | str | None = None,
                 fuse=None, timeout: float = 3.0, retries: int = 2,
                 clock: Callable[[], float] = time.monotonic, routes=None, group: str = "",
                 flow_retries: int = FLOW_RETRIES, backoff: Sequence[float] = (),
                 counters: SendCounters | None = None, tracer=None) -> None:
        self.routes = routes
        self.tracer = tracer
        self._routes_version = routes.version if routes is not None else 0
        self.brokers, self.fuse = producer_brokers(brokers, routes, fuse, clock)
        self.timeout = timeout
        self.options = SendOptions(retries, flow_retries, tuple(backoff), group)
        self.counters = counters if counters is not None else SendCounters()
        self._names = list(self.brokers)
        self._rr = itertools.count()
        self._conns: dict[str, _AioConnection] = {}
        self._connecting: dict[str, asyncio.Lock] = {}
        self._closing = False
        self._heartbeat: asyncio.TimerHandle | None = None
        self._trace_sender: AsyncProducer | None = None  # the tracer's, on this loop

    def _beat(self) -> None:
        """The loop ran: tell the fuse (its lateness excuses the brokers) and let it
        judge calls in flight from this thread, the one that reads their answers."""
        self.fuse.heartbeat(HEARTBEAT_S)
        self.fuse.tick()
        if not self._closing:
            self._heartbeat = asyncio.get_running_loop().call_later(HEARTBEAT_S, self._beat)

    def _reroute(self) -> None:
        """The routes moved (a failover): follow each group to its master."""
        self._routes_version = self.routes.version
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

    async def _conn(self, name: str) -> _AioConnection:
        conn = self._conns.get(name)
        if conn is not None and conn.transport is not None:
            return conn
        if not self.brokers[name]:
            raise BrokerUnavailable(f"group {name} has no master")
        async with self._connecting.setdefault(name, asyncio.Lock()):  # one connect at a time
            conn = self._conns.get(name)
            if conn is not None and conn.transport is not None:
                return conn
            host, port = parse_addr(self.brokers[name])
            try:
                _t, conn = await asyncio.wait_for(
                    asyncio.get_running_loop().create_connection(
                        lambda: _AioConnection(self.brokers[name]), host, port),
                    self.timeout)
            except (OSError, TimeoutError) as exc:
                raise BrokerUnavailable(f"{self.brokers[name]}: {exc}") from None
            self._conns[name] = conn
        return conn

    async def _call(self, op: Op, payload: bytes) -> SendResult:
        if self._heartbeat is None and self.fuse is not None and not self._closing:
            self._beat()
        if self.routes is not None and self.routes.version != self._routes_version:
            self._reroute()
        plan = SendPlan(self.fuse, self._names, self.options, op, self._rr, self.counters)
        while True:
            broker = plan.next()
            code = body = None
            reason = ""
            try:
                conn = await self._conn(broker)
                rid, fut = conn.request(op, payload)
                # a timer on the future, not asyncio.wait_for: wait_for costs a task per call
                timer = asyncio.get_running_loop().call_later(self.timeout, conn.expire, rid)
                try:
                    raw, body = await fut
                finally:
                    timer.cancel()
                code = Code(raw)
            except (BrokerUnavailable, TimeoutError) as exc:
                reason = (f"{self.brokers[broker]}: no answer in {self.timeout:g} s"
                          if isinstance(exc, TimeoutError) else str(exc))
            kind, value = plan.answer(code, body, reason, self._closing)
            if kind == "ok":
                return value
            if kind == "fail":
                raise value
            if kind == "backoff":
                await asyncio.sleep(value)

    async def send(self, topic: str, body: bytes, tags: str | None = None,
                   keys: str | None = None, properties: dict[str, str] | None = None
                   ) -> SendResult:
        tr = self.tracer
        if tr is None or not tr.sampler.sample():
            return await self._call(Op.SEND, encode_one(
                topic, body, tags, keys, with_group(properties, self.options.group)))
        if self._trace_sender is None:
            self._attach_trace()
        born, t0 = now_ms(), time.perf_counter()
        payload = encode_one(topic, body, tags, keys, with_group(traced_properties(properties),
                                                             self.options.group))
        try:
            result = await self._call(Op.SEND, payload)
        except SendFailed as exc:
            tr.record(topic, tags, keys, len(body), born, time.perf_counter() - t0, exc=exc)
            raise
        tr.record(topic, tags, keys, len(body), born, time.perf_counter() - t0, result)
        return result

    async def send_batch(self, topic: str, bodies: Sequence[bytes | OutMessage]) -> SendResult:
        return await self._call(Op.SEND_BATCH, encode_many(topic, bodies, self.options.group))

    def _attach_trace(self) -> None:
        """Send the tracer's batches from this loop, through a producer of their own
        (no fuse: a trace batch's RT must not judge a broker), not from its thread."""
        sender = self._trace_sender = AsyncProducer(
            dict(self.brokers) if self.routes is None else None, fuse=False, timeout=self.timeout,
            routes=self.routes)
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
        for conn in self._conns.values():
            if conn.transport is not None:
                conn.transport.close()
        self._conns.clear()

    async def __aenter__(self) -> AsyncProducer:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
