"""One pipelined connection to a broker for asyncio code (the `AsyncProducer`'s): the
requests of one turn of the loop leave in one write (the broker reads them in one read
and answers them in one write), and their answers call back by request id; no task, no
future, no timer per request (timeouts swept by one timer per connection, armed for the
oldest request's). `authenticate` is the ACL handshake (acl.handshake) over it, before
any send.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable

from broker_core.acl.handshake import AuthFailed, client_handshake_async
from broker_core.client.connection import TLS_HINT, BrokerUnavailable
from broker_core.deadline import Deadline
from broker_core.gather_write import write_parts
from broker_core.protocol import (
    FLAG_RESPONSE,
    Code,
    FrameDecoder,
    ProtocolError,
    decode_json,
    encode_frame,
    encode_json,
)

Answered = Callable[[int | None, bytes | None, str], None]  # (code, body, why no answer)


class AioConnection(asyncio.Protocol):
    """One pipelined connection; answers call back by request id."""

    def __init__(self, addr: str, timeout: float, tls: bool) -> None:
        self.addr = addr
        self.timeout = timeout
        self.tls = tls
        self.answered = False  # anything read yet: a plain link closed before is TLS_HINT
        self.decoder = FrameDecoder()
        self.pending: dict[int, tuple[float, Answered]] = {}  # rid -> (deadline, callback)
        self.transport: asyncio.Transport | None = None
        self.ids = itertools.count(1)
        self._sweeper = Deadline(self._expire, "request timeouts")
        self._out: list[bytes] = []  # this turn's requests, written at its end

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.answered = True
        try:
            frames = self.decoder.feed(data)
        except ProtocolError as exc:
            self._fail(f"{self.addr}: bad frame from broker: {exc}")
            return
        pending = self.pending
        for header, body in frames:
            entry = pending.pop(header.request_id, None)
            if entry is not None and header.flags & FLAG_RESPONSE:
                entry[1](header.code, body, "")

    def connection_lost(self, exc) -> None:
        hint = "" if self.answered or self.tls else TLS_HINT
        self._fail(f"{self.addr}: connection lost" + (f": {exc}" if exc else hint))

    def _fail(self, reason: str) -> None:
        if self.transport is not None:
            self.transport.close()
        self.transport = None
        self._out.clear()
        self._sweeper.cancel()
        pending, self.pending = self.pending, {}
        for _deadline, answered in pending.values():
            answered(None, None, reason)

    def _expire(self) -> float | None:
        """Fail the requests past their deadline (oldest first: the dict keeps order);
        in how long the oldest left is due."""
        now = time.monotonic()
        pending = self.pending
        while pending:
            rid, (deadline, answered) = next(iter(pending.items()))
            if deadline > now:
                return deadline - now
            del pending[rid]
            answered(None, None, f"{self.addr}: no answer in {self.timeout:g} s")
        return None

    def request(self, op: int, body: bytes, answered: Answered, flags: int = 0) -> None:
        if self.transport is None or self.transport.is_closing():
            # closing: the peer reset it (or a reroute closed it) and connection_lost, with
            # the cause, has not run yet
            raise BrokerUnavailable(f"{self.addr}: " + (
                "not connected" if self.transport is None else "connection closing"))
        rid = next(self.ids) & 0xFFFFFFFF
        self.pending[rid] = (time.monotonic() + self.timeout, answered)
        out = self._out
        out.append(encode_frame(op, rid, body, flags=flags))
        if len(out) == 1:
            asyncio.get_running_loop().call_soon(self._write)
        if self._sweeper.when is None:
            self._sweeper.after(self.timeout)

    def _write(self) -> None:
        out, self._out = self._out, []
        if out and self.transport is not None:
            write_parts(self.transport, out, self.tls)


async def authenticate(conn: AioConnection, creds) -> None:
    """The connection's handshake (acl.handshake) before any send; AuthFailed when the
    broker refuses, BrokerUnavailable when it does not answer."""
    loop = asyncio.get_running_loop()

    async def call(op: int, payload: dict):
        fut = loop.create_future()
        conn.request(op, encode_json(payload),
                     lambda code, body, reason: fut.done() or fut.set_result((code, body, reason)))
        code, body, reason = await fut
        if code is None:
            raise BrokerUnavailable(reason)
        return code, decode_json(body) if code == Code.OK else body.decode("utf-8", "replace")

    try:
        await client_handshake_async(call, creds.user, creds.secret)
    except AuthFailed as exc:
        conn._fail("authentication failed")
        raise AuthFailed(f"{conn.addr}: {exc}") from None
