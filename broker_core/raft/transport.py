"""Links between a group's members: each dials every peer and sends on its own link;
what it receives comes in on the links the peers dialled (raft.wire frames).

Raft tolerates loss, so sending never waits: a message to a peer whose link is down,
or whose link has more than `MAX_BUFFERED` bytes unsent (a peer that stopped
reading), is dropped and counted, and the node's next beat or retry sends again. A
link that drops is dialled again after `REDIAL_S`, doubling to `MAX_REDIAL_S`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable

from broker_core.raft import wire
from broker_core.raft.messages import Message

log = logging.getLogger("floodgate.raft")

MAX_BUFFERED = 8 << 20
REDIAL_S, MAX_REDIAL_S = 0.05, 1.0


class RaftTransport:
    def __init__(self, name: str, group: str, peers: dict[str, tuple[str, int]],
                 on_message: Callable[[Message], None], *, ssl_server=None,
                 ssl_client=None) -> None:
        self.name, self.group, self.peers = name, group, dict(peers)
        self.on_message = on_message
        self._ssl_server, self._ssl_client = ssl_server, ssl_client
        self._out: dict[str, asyncio.StreamWriter] = {}
        self._dialers: dict[str, asyncio.Task] = {}
        self._server: asyncio.base_events.Server | None = None
        self._inbound: set[asyncio.StreamWriter] = set()
        self.counters: Counter[str] = Counter()
        self._closed = False

    async def start(self, bind: str, port: int) -> None:
        self._server = await asyncio.start_server(self._serve, bind, port,
                                                  ssl=self._ssl_server, reuse_address=True)
        for peer in self.peers:
            self._dialers[peer] = asyncio.ensure_future(self._dial(peer))

    async def close(self) -> None:
        self._closed = True
        for task in self._dialers.values():
            task.cancel()
        for w in [*self._out.values(), *self._inbound]:
            w.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def connected(self) -> list[str]:
        return sorted(self._out)

    # -- sending ---------------------------------------------------------------------------
    def send(self, to: str, msg: Message) -> None:
        w = self._out.get(to)
        if w is None or w.transport.get_write_buffer_size() > MAX_BUFFERED:
            self.counters["dropped"] += 1
            return
        w.write(wire.encode(msg))
        self.counters["sent"] += 1

    async def _dial(self, peer: str) -> None:
        host, port = self.peers[peer]
        wait = REDIAL_S
        while not self._closed:
            try:
                reader, writer = await asyncio.open_connection(host, port, ssl=self._ssl_client)
            except OSError:
                await asyncio.sleep(wait)
                wait = min(MAX_REDIAL_S, wait * 2)
                continue
            writer.write(wire.hello(self.group, self.name))
            self._out[peer] = writer
            wait = REDIAL_S
            try:
                await reader.read()  # the peer never writes back: this returns at EOF
            except OSError:
                pass
            finally:
                if self._out.get(peer) is writer:
                    del self._out[peer]
                writer.close()
            self.counters["redials"] += 1

    # -- receiving -------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._inbound.add(writer)
        peer = None
        try:
            while True:
                head = await reader.readexactly(wire.LENGTH.size)
                (n,) = wire.LENGTH.unpack(head)
                if n > wire.MAX_FRAME:
                    raise wire.WireError(f"frame of {n} bytes")
                kind, fields, msg = wire.decode(await reader.readexactly(n))
                if peer is None:
                    if kind != "hello" or fields.get("group") != self.group or \
                            fields.get("name") not in self.peers:
                        raise wire.WireError(f"not a member of group {self.group}: {fields}")
                    peer = fields["name"]
                    continue
                if msg is not None:
                    self.counters["received"] += 1
                    self.on_message(msg)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except wire.WireError as exc:
            self.counters["refused"] += 1
            log.warning("raft link from %s closed: %s", peer or "an unknown peer", exc)
        finally:
            self._inbound.discard(writer)
            writer.close()
