"""TCP side of the broker: asyncio Protocol framing, one task per request.

Bad input never takes the server down: a frame with a wrong magic, a bad
length or an oversized body is answered BAD_REQUEST and the connection is
closed (the stream cannot be trusted past it); a body that does not decode is
answered BAD_REQUEST and the connection lives on; a client that leaves half a
frame hanging for `frame_timeout_s` (slow loris) is disconnected.
"""

from __future__ import annotations

import asyncio
import logging
import time
from time import perf_counter

from broker_core import protocol as p
from broker_core.server.broker import Broker

log = logging.getLogger("floodgate.broker")
# answers that carry the broker's service time (PROTOCOL.md)
_TIMED_OPS = (p.Op.SEND, p.Op.SEND_BATCH)
_STORED = (p.Code.OK, p.Code.FLUSH_DISK_TIMEOUT, p.Code.FLUSH_SLAVE_TIMEOUT,
           p.Code.SLAVE_NOT_AVAILABLE)


class BrokerProtocol(asyncio.Protocol):
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.decoder = p.FrameDecoder()
        self.transport: asyncio.Transport | None = None
        self.partial_since: float | None = None
        self.tasks: set[asyncio.Future] = set()  # requests in progress (tasks, parked sends)

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.broker.counters["connections"] += 1
        self.broker.connections.add(self)

    def connection_lost(self, exc) -> None:
        self.broker.counters["connections"] -= 1
        self.broker.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.decoder.feed(data)
        except p.ProtocolError as exc:
            self._reject(str(exc))
            return
        received = perf_counter()  # the broker's part of a send's RT starts here
        self.partial_since = time.monotonic() if self.decoder.pending else None
        broker = self.broker
        for header, body in frames:
            if header.is_response:
                self._reject("a response frame sent to the broker")
                return
            if header.op == p.Op.SEND:
                answered = broker.send_now(body)
                if isinstance(answered, asyncio.Future):  # parked until the slaves ack
                    self.tasks.add(answered)
                    answered.add_done_callback(
                        lambda f, h=header, r=received: self._answer_parked(h, f, r))
                    continue
                if answered is not None:
                    if not header.oneway:
                        self._answer(header, *answered, received)
                    continue
            task = asyncio.ensure_future(self._serve(header, body, received))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _serve(self, header: p.Header, body: bytes, received: float) -> None:
        try:
            code, answer = await self.broker.handle(header, body)
        except Exception:  # noqa: BLE001 - a bug must not kill the connection's peers
            log.exception("request op=%s failed", header.op)
            code, answer = p.Code.SYSTEM_ERROR, b"internal error (see broker log)"
        if header.oneway or self.transport is None or self.transport.is_closing():
            return
        self._answer(header, code, answer, received)

    def _answer_parked(self, header: p.Header, fut: asyncio.Future, received: float) -> None:
        self.tasks.discard(fut)
        if header.oneway or self.transport is None or self.transport.is_closing():
            return
        self._answer(header, *fut.result(), received)

    def _answer(self, header: p.Header, code: int, answer: bytes, received: float) -> None:
        if header.op in _TIMED_OPS and code in _STORED:
            answer = p.with_service_time(answer, perf_counter() - received)
        self.transport.write(
            p.encode_frame(header.op, header.request_id, answer, flags=p.FLAG_RESPONSE, code=code)
        )

    def _reject(self, reason: str) -> None:
        self.broker.counters["bad_requests"] += 1
        self.broker.counters["connections_closed_bad"] += 1
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(
                p.encode_frame(
                    0, 0, reason.encode(), flags=p.FLAG_RESPONSE, code=p.Code.BAD_REQUEST
                )
            )
            self.transport.close()


async def reap_slow_clients(broker: Broker, interval: float = 1.0) -> None:
    """Close connections that have held half a frame for too long."""
    limit = broker.config.frame_timeout_s
    while True:
        await asyncio.sleep(interval)
        now = time.monotonic()
        for conn in list(broker.connections):
            if conn.partial_since is not None and now - conn.partial_since > limit:
                conn._reject(f"incomplete frame for over {limit:g} s")


async def start_tcp(broker: Broker) -> asyncio.base_events.Server:
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: BrokerProtocol(broker),
        broker.config.bind,
        broker.config.port,
        reuse_address=True,
        backlog=2048,
    )
