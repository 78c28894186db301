"""Links between a group's members: each dials every peer and sends on its own link;
what it receives comes in on the links the peers dialled (raft.wire frames).

Raft tolerates loss, so sending never waits: a message to a peer whose link is down
or closing, or whose link has more than `MAX_BUFFERED` bytes unsent (a peer that
stopped reading), is dropped and counted, and the node's next beat or retry sends
again. A link that drops is dialled again after `REDIAL_S`, doubling to `MAX_REDIAL_S`.
Frames are cut from what a link reads by a protocol (no coroutine a frame: asyncio's
streams were a tenth of a member's CPU at one send in flight).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable

from broker_core.raft import wire
from broker_core.raft.messages import Message

log = logging.getLogger("floodgate.raft")

MAX_BUFFERED = 1 << 20
REDIAL_S, MAX_REDIAL_S = 0.05, 1.0


class RaftTransport:
    def __init__(self, name: str, group: str, peers: dict[str, tuple[str, int]],
                 on_message: Callable[[Message], None], *, ssl_server=None,
                 ssl_client=None, on_refused: Callable[[str], None] | None = None) -> None:
        self.name, self.group, self.peers = name, group, dict(peers)
        self.on_message, self.on_refused = on_message, on_refused
        self._ssl_server, self._ssl_client = ssl_server, ssl_client
        self._out: dict[str, asyncio.Transport] = {}
        self._dialers: dict[str, asyncio.Task] = {}
        self._server: asyncio.base_events.Server | None = None
        self._inbound: set[asyncio.Transport] = set()
        self.counters: Counter[str] = Counter()
        self._closed = False

    async def start(self, bind: str, port: int,
                    stream_link: Callable[[], asyncio.Protocol] | None = None) -> None:
        """`stream_link`: a protocol for links whose first frame is a replication
        stream's HELLO (ha.wire: kind 1, where a Raft link's hello is kind 0), so that a
        raft group's stream (raft.stream_group) shares this port."""
        loop = asyncio.get_running_loop()
        factory = (lambda: _Inbound(self)) if stream_link is None else \
            (lambda: _FirstFrame(self, stream_link))
        self._server = await loop.create_server(factory, bind, port,
                                                ssl=self._ssl_server, reuse_address=True)
        for peer in self.peers:
            self._dialers[peer] = asyncio.ensure_future(self._dial(peer))

    async def close(self) -> None:
        self._closed = True
        for task in self._dialers.values():
            task.cancel()
        for t in [*self._out.values(), *self._inbound]:
            t.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def set_peers(self, peers: dict[str, tuple[str, int]]) -> None:
        """The group's members changed (raft.stream_members): dial a new one, hang up on one
        gone (its links' hellos are refused from now on)."""
        for name in [n for n, addr in self.peers.items() if peers.get(n) != addr]:
            del self.peers[name]
            task = self._dialers.pop(name, None)
            if task is not None:
                task.cancel()
            link = self._out.pop(name, None)
            if link is not None:
                link.close()
        for name, addr in peers.items():
            if name not in self.peers and name != self.name:
                self.peers[name] = addr
                if self._server is not None and not self._closed:
                    self._dialers[name] = asyncio.ensure_future(self._dial(name))

    def connected(self) -> list[str]:
        return sorted(self._out)

    # -- sending ---------------------------------------------------------------------------
    def send(self, to: str, msg: Message) -> None:
        t = self._out.get(to)
        # (a link closed but not yet forgotten: its connection_lost comes a loop turn
        # later, and uvloop raises on a write to it, which unwound the caller: a peer's
        # data_received, whose own link was then closed as broken)
        if t is None or t.is_closing() or t.get_write_buffer_size() > MAX_BUFFERED:
            self.counters["dropped"] += 1
            return
        t.write(wire.encode(msg))
        self.counters["sent"] += 1

    async def _dial(self, peer: str) -> None:
        loop = asyncio.get_running_loop()
        host, port = self.peers[peer]
        wait = REDIAL_S
        while not self._closed:
            lost = loop.create_future()
            try:
                t, _p = await loop.create_connection(lambda lost=lost: _Outbound(lost), host, port,
                                                     ssl=self._ssl_client)
            except OSError as exc:
                if isinstance(exc, ConnectionRefusedError) and self.on_refused is not None:
                    self.on_refused(peer)  # nothing listens there: the peer process is gone
                await asyncio.sleep(wait)
                wait = min(MAX_REDIAL_S, wait * 2)
                continue
            t.write(wire.hello(self.group, self.name))
            self._out[peer] = t
            wait = REDIAL_S
            try:
                await lost  # the peer never writes back: this resolves when the link drops
            finally:
                if self._out.get(peer) is t:
                    del self._out[peer]
                t.close()
            self.counters["redials"] += 1


class _Outbound(asyncio.Protocol):
    def __init__(self, lost: asyncio.Future) -> None:
        self.lost = lost

    def connection_lost(self, exc) -> None:
        if not self.lost.done():
            self.lost.set_result(None)


class _Inbound(asyncio.Protocol):
    """A link a peer dialled: its hello, then its messages."""

    def __init__(self, owner: RaftTransport) -> None:
        self.owner = owner
        self.buf = bytearray()
        self.peer: str | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.owner._inbound.add(transport)

    def connection_lost(self, exc) -> None:
        self.owner._inbound.discard(self.transport)

    def data_received(self, data: bytes) -> None:
        buf, at, owner = self.buf, 0, self.owner
        buf += data
        try:
            while len(buf) - at >= wire.LENGTH.size:
                (n,) = wire.LENGTH.unpack_from(buf, at)
                if not 0 < n <= wire.MAX_FRAME:
                    raise wire.WireError(f"frame of {n} bytes")
                if len(buf) - at - wire.LENGTH.size < n:
                    break
                start = at + wire.LENGTH.size
                kind, fields, msg = wire.decode(buf[start:start + n])
                at = start + n
                if self.peer is None:
                    if kind != "hello" or fields.get("group") != owner.group or \
                            fields.get("name") not in owner.peers:
                        raise wire.WireError(f"not a member of group {owner.group}: {fields}")
                    self.peer = fields["name"]
                elif msg is not None:
                    owner.counters["received"] += 1
                    owner.on_message(msg)
        except wire.WireError as exc:
            owner.counters["refused"] += 1
            log.warning("raft link from %s closed: %s", self.peer or "an unknown peer", exc)
            self.transport.close()
            return
        del buf[:at]


class _FirstFrame(asyncio.Protocol):
    """A link on a port shared with a raft group's stream: its first frame's kind byte
    says whose it is, and the link is handed to that protocol."""

    KIND_AT = wire.LENGTH.size  # (both wires: a 4-byte length, then the kind)

    def __init__(self, owner: RaftTransport, stream_link: Callable[[], asyncio.Protocol]):
        self.owner, self.stream_link = owner, stream_link
        self.buf = bytearray()
        self.transport = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) <= self.KIND_AT:
            return
        proto = _Inbound(self.owner) if self.buf[self.KIND_AT] == wire.HELLO \
            else self.stream_link()
        self.transport.set_protocol(proto)
        proto.connection_made(self.transport)
        proto.data_received(bytes(self.buf))
