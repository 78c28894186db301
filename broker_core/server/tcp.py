"""TCP side of the broker: asyncio Protocol framing.

SEND, SEND_MULTI, SEND_BATCH, PULL and END_TRANSACTION are answered from `data_received` itself
(`send_ops`, `pull_ops`, `tx_ops`: a commit is stored in the order of the frames): at once when they can be, later through `reply` when they must wait
(the slaves' acks, a sync flush, a held pull); the other ops, rare, get a task.

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
from broker_core import reply_batch
from broker_core.gather_write import is_tls, write_parts
from broker_core.protocol.idempotence import split_id
from broker_core.server import tx_ops
from broker_core.server.access import no_permission
from broker_core.server.broker import Broker
from broker_core.server.multi_ops import send_multi

log = logging.getLogger("floodgate.broker")
LINGER_S = 1.0  # a rejected connection's peer has this long to read the answer


def _dropped(_answer) -> None:
    """The reply of a ONEWAY request: nobody reads it."""


class BrokerProtocol(asyncio.Protocol):
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.decoder = p.FrameDecoder()
        self.transport: asyncio.Transport | None = None
        self.partial_since: float | None = None
        self.tasks: set[asyncio.Future] = set()  # control requests in progress
        self.guard = None  # server.access.ConnectionGuard when the broker enforces its ACL
        self._replies: list[bytes] = []  # answers that waited, written at the turn's end
        self._loop: asyncio.AbstractEventLoop | None = None
        self.rejected = False  # answered BAD_REQUEST and closing: what comes is dropped
        self.tls = False  # the connection is TLS: answers are joined before they are written

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.tls = is_tls(transport)
        self._loop = asyncio.get_running_loop()
        self.guard = self.broker.access.guard(transport.get_extra_info("peername"))
        self.broker.counters["connections"] += 1
        self.broker.connections.add(self)

    def connection_lost(self, exc) -> None:
        self.broker.counters["connections"] -= 1
        self.broker.connections.discard(self)
        self.transport = None

    def data_received(self, data: bytes) -> None:
        if self.rejected:
            return
        try:
            frames = self.decoder.feed(data)
        except p.ProtocolError as exc:
            self._reject(str(exc))
            return
        received = perf_counter()  # the broker's part of a send's RT starts here
        broker = self.broker
        broker.woke()
        if self.decoder.pending:
            self.partial_since = time.monotonic()
            broker.partial_frame()
        else:
            self.partial_since = None
        out: list[bytes] = []
        for header, body in frames:
            if header.flags & p.FLAG_RESPONSE:
                self._reject("a response frame sent to the broker")
                return
            op, oneway = header.op, header.flags & p.FLAG_ONEWAY
            reply = _dropped if oneway else self.reply
            ident = None
            if header.flags & p.FLAG_IDEMPOTENT:
                try:
                    ident, body = split_id(op, body, header.flags)
                except ValueError as exc:
                    if not oneway:
                        out.append(p.encode_answer(op, header.request_id,
                                                   *broker.bad(str(exc))))
                    continue
            if self.guard is not None:
                if op == p.Op.AUTH_START or op == p.Op.AUTH_FINISH:
                    code, answer, close = self.guard.authenticate(op, body)
                    out.append(p.encode_answer(op, header.request_id, code, answer))
                    if close:  # a failed handshake: the stream is not trusted past it
                        self._flush(out)
                        self.transport.close()
                        return
                    continue
                why = self.guard.refusal(op, body)
                if why is not None:
                    if not oneway:
                        out.append(no_permission(op, header.request_id, why))
                    continue
            if op == p.Op.SEND:
                answer = broker.sends.send(header.request_id, body, received, reply, ident)
            elif op == p.Op.PULL:
                answer = broker.pulls.pull(header.request_id, body, received, reply)
            elif op == p.Op.SEND_MULTI:
                answer = send_multi(broker.sends, header.request_id, body, received, reply,
                                    ident)
            elif op == p.Op.SEND_BATCH:
                answer = broker.sends.send_batch(header.request_id, body, received, reply)
            elif op == p.Op.END_TRANSACTION:  # in order with the sends around it
                answer = tx_ops.end_frame(broker, header.request_id, body, reply)
            else:
                task = asyncio.ensure_future(self._serve(header, body))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
                continue
            if answer is not None and not oneway:
                if type(answer) is list:
                    out.extend(answer)
                else:
                    out.append(answer)
        self._flush(out)

    def _flush(self, out: list[bytes]) -> None:
        if out and self.transport is not None:
            write_parts(self.transport, out, self.tls)

    def reply(self, answer: bytes | list[bytes]) -> None:
        """An answer that had to wait (the slaves' acks, a held pull, a fault's delay).
        Those of one turn of the loop leave in one write: a slave's ack releases every
        send it covers at once, and their client reads them in one read."""
        t = self.transport
        if t is None or t.is_closing():
            return
        replies = self._replies
        if not replies and not reply_batch.defer(self, self._write_replies):
            self._loop.call_soon(self._write_replies)
        if type(answer) is list:
            replies.extend(answer)
        else:
            replies.append(answer)

    def _write_replies(self) -> None:
        replies, self._replies = self._replies, []
        t = self.transport
        if replies and t is not None and not t.is_closing():
            write_parts(t, replies, self.tls)

    async def _serve(self, header: p.Header, body: bytes) -> None:
        try:
            code, answer = await self.broker.handle(header, body)
        except Exception:  # noqa: BLE001 - a bug must not kill the connection's peers
            log.exception("request op=%s failed", header.op)
            code, answer = p.Code.SYSTEM_ERROR, b"internal error (see broker log)"
        if not header.oneway:
            self.reply(p.encode_answer(header.op, header.request_id, code, answer))

    def _reject(self, reason: str) -> None:
        if self.rejected:
            return
        self.broker.counters["bad_requests"] += 1
        self.broker.counters["connections_closed_bad"] += 1
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(
                p.encode_frame(
                    0, 0, reason.encode(), flags=p.FLAG_RESPONSE, code=p.Code.BAD_REQUEST
                )
            )
            # a close with bytes unread resets the connection, and the peer may lose the
            # answer with it (an HTTP request sent here: its body still coming): say we
            # are done, drop what still comes, close a moment later (a lingering close)
            self.rejected, self.partial_since = True, None
            if self.transport.can_write_eof():
                self.transport.write_eof()
                self._loop.call_later(LINGER_S, self.transport.close)
            else:
                self.transport.close()


def reap_slow_clients(broker: Broker, now: float) -> float | None:
    """Close connections that have held half a frame for too long; in how many seconds
    the next one that holds half a frame would be (None: none does)."""
    limit = broker.config.frame_timeout_s
    soonest = None
    for conn in list(broker.connections):
        since = conn.partial_since
        if since is None:
            continue
        if now - since >= limit:
            conn._reject(f"incomplete frame for over {limit:g} s")
        elif soonest is None or since < soonest:
            soonest = since
    return None if soonest is None else soonest + limit - now


async def start_tcp(broker: Broker) -> asyncio.base_events.Server:
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: BrokerProtocol(broker),
        broker.config.bind,
        broker.config.port,
        reuse_address=True,
        ssl=broker.tls,
        backlog=2048,
    )
