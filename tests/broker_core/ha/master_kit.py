"""What the master's replication tests share (test_master, test_master_links): real
stores, a real slave or one the test speaks for by hand (`HandSlave`), the group record
as the master changes it (`Recorded`)."""

from __future__ import annotations

import asyncio
import contextlib

from broker_core.ha import wire
from broker_core.ha.epochs import EpochHistory
from broker_core.ha.master import ReplicationMaster
from broker_core.store import MessageStore


def stores_fixture(tmp_path, small_config):
    """A master's store and a slave's (each test module makes it its `stores` fixture)."""
    master = MessageStore(tmp_path / "m", small_config())
    slave = MessageStore(tmp_path / "s", small_config())
    yield master, slave
    slave.close()
    master.close()


class Recorded:
    """The group record's in-sync set as the master writes it (ZooKeeper's part), each
    write with the master's own set at that moment; `away`: ZooKeeper cannot be reached."""

    def __init__(self) -> None:
        self.master: ReplicationMaster | None = None
        self.writes: list[tuple[frozenset[str], frozenset[str]]] = []
        self.away: Exception | None = None
        self.refused = 0

    async def persist(self, in_sync: frozenset[str]) -> bool:
        if self.away is not None:
            self.refused += 1
            raise self.away
        self.writes.append((in_sync, frozenset(self.master.in_sync)))
        return True

    @property
    def sets(self) -> list[frozenset[str]]:
        return [written for written, _local in self.writes]


@contextlib.asynccontextmanager
async def replicating(store: MessageStore, clock, timeout_s: float = 30.0,
                      record: Recorded | None = None, role: dict | None = None):
    """A master of group "g" at epoch 1 serving its HA port: (master, port address)."""
    role = {"master": True} if role is None else role
    master = ReplicationMaster(
        store, "g", sync=True, timeout_s=timeout_s, epoch=lambda: 1,
        history=lambda: EpochHistory([(1, 0)]), is_master=lambda: role["master"],
        meta=lambda: {"topics": {}}, persist=record.persist if record else None, clock=clock)
    if record is not None:
        record.master = master
    server = await asyncio.get_running_loop().create_server(
        master.link_factory, "127.0.0.1", 0)
    master.start()
    try:
        yield master, f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        master.stop()
        server.close()


class HandSlave:
    """A slave whose end of the link the test speaks by hand: its HELLO, then acks only
    when told to."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def link(cls, addr: str, store: MessageStore, **hello) -> tuple[HandSlave, int, dict]:
        """Connect and say HELLO: (the slave, the answer's kind, its JSON)."""
        host, port = addr.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        doc = {"name": "s", "group": "g", "epoch": 1, "offset": 0, "history": [[1, 0]],
               "segment_bytes": store.commitlog.allocator.size, **hello}
        writer.write(wire.json_frame(wire.HELLO, doc))
        kind, body = await asyncio.wait_for(wire.read_frame(reader), 5)
        return cls(reader, writer), kind, wire.decode_json(body)

    async def ack(self, offset: int) -> None:
        self.writer.write(wire.ack_frame(offset))
        await self.writer.drain()

    async def received(self, upto: int) -> bytes:
        """The log bytes the master streamed, up to `upto`."""
        data = bytearray()
        while True:
            kind, body = await asyncio.wait_for(wire.read_frame(self.reader), 5)
            if kind == wire.DATA:
                at, _end, _ms, _epoch, _commit, chunk = wire.decode_data(body)
                assert at == len(data)
                data += chunk
                if len(data) >= upto:
                    return bytes(data)

    async def closed(self) -> bool:
        """True once the master has closed the link (after whatever it still sent)."""
        try:
            while True:
                await asyncio.wait_for(wire.read_frame(self.reader), 5)
        except wire.LinkError:
            return True

    def close(self) -> None:
        self.writer.close()


def put(master: ReplicationMaster, body: bytes) -> int:
    """Append as the write path does: store, then tell the master; the record's end."""
    end = master.store.put("orders", 0, body).end_offset
    master.appended(end)
    return end



async def settle() -> None:
    """Let what the last event woke (the in-sync loop) run its course."""
    for _ in range(10):
        await asyncio.sleep(0)
