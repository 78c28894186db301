"""The master's side of replication (`ReplicationMaster`) with real stores, its HA port
on a real socket and the master's clock in the test's hand: a slave that keeps up gets
the log and joins the in-sync set, locally before the group record says so; a parked
send is answered once the slave's acks cover it; a slave that stops acking times the
send out on the master's clock and leaves the set (recorded first), and comes back once
caught up; one that goes away fails parked sends at once, unless the record cannot be
changed; a slave joins only once it holds what the master appended since it started;
HELLOs that do not belong are answered with why, or told where to cut; a slave linking
again replaces its old link; stopping closes the links."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time

import pytest

from broker_core.ha import wire
from broker_core.ha.epochs import EpochFile, EpochHistory
from broker_core.ha.master import JOIN_LAG_S, ReplicationMaster
from broker_core.ha.slave import MasterInfo, ReplicaClient
from broker_core.protocol import Code
from broker_core.store import MessageStore
from tests.clock import ManualClock

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def stores(tmp_path, small_config):
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
                at, _end, _ms, _epoch, chunk = wire.decode_data(body)
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


async def until(cond, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g} s"
        await asyncio.sleep(0.01)


async def settle() -> None:
    """Let what the last event woke (the in-sync loop) run its course."""
    for _ in range(10):
        await asyncio.sleep(0)


def test_a_slave_that_keeps_up_gets_the_log_and_is_in_sync_before_the_record_says_so(
        tmp_path, stores):
    master_store, slave_store = stores
    record = Recorded()

    async def main():
        async with replicating(master_store, ManualClock(), record=record) as (rm, addr):
            client = ReplicaClient(slave_store, EpochFile(tmp_path / "epochs.json"), "s", "g",
                                   MasterInfo("m", addr, 1), known_epoch=lambda: 1,
                                   on_records=lambda touched: None, on_meta=lambda doc: None,
                                   on_truncate=lambda offset, cut: None)
            client.start()
            try:
                await until(lambda: rm.in_sync == {"s"}, what="the slave in sync")
                ends = [put(rm, b"m%d" % i * 50) for i in range(40)]
                await until(lambda: rm.acked.get("s") == ends[-1], what="acked to the end")
                assert rm.park(ends[-1], lambda code: None) == Code.OK  # held: answered now
                return rm.figures(), dict(rm.counters), ends[-1]
            finally:
                await client.stop()

    figures, counters, end = asyncio.run(main())
    assert slave_store.commitlog.write_offset == end
    assert slave_store.commitlog.read(0, end) == master_store.commitlog.read(0, end)
    # joined locally, then recorded: the local set always holds the recorded one
    assert record.writes == [(frozenset({"s"}), frozenset({"s"}))]
    assert counters["isr_changes"] == 1
    [row] = figures
    assert (row["name"], row["acked"], row["lag_bytes"], row["lag_s"], row["in_sync"]) == \
        ("s", end, 0, 0.0, True)


def test_a_parked_send_is_answered_once_the_slaves_acks_cover_it(stores):
    master_store, _ = stores

    async def main():
        async with replicating(master_store, ManualClock()) as (rm, addr):
            slave, kind, welcome = await HandSlave.link(addr, master_store)
            assert kind == wire.WELCOME and welcome["offset"] == 0 and welcome["epoch"] == 1
            await until(lambda: rm.in_sync == {"s"}, what="the slave in sync")
            ends = [put(rm, bytes([i]) * 100) for i in range(3)]
            streamed = await slave.received(ends[-1])
            assert streamed == master_store.commitlog.read(0, ends[-1])
            answered: dict[int, Code] = {}
            for end in ends:
                assert rm.park(end, lambda code, end=end: answered.__setitem__(end, code)) \
                    is None
            last = asyncio.ensure_future(rm.wait(ends[2]))
            await slave.ack(ends[1])
            await until(lambda: rm.acked["s"] == ends[1], what="the first ack")
            assert answered == {ends[0]: Code.OK, ends[1]: Code.OK} and not last.done()
            await slave.ack(ends[2])
            assert await asyncio.wait_for(last, 5) == Code.OK
            assert answered[ends[2]] == Code.OK
            slave.close()

    asyncio.run(main())


def test_a_slave_that_stops_acking_times_the_send_out_on_the_masters_clock_and_leaves(
        stores):
    master_store, _ = stores
    clock, record = ManualClock(), Recorded()

    async def main():
        async with replicating(master_store, clock, timeout_s=0.2, record=record) as (rm, addr):
            slave, _kind, _doc = await HandSlave.link(addr, master_store)
            await until(lambda: rm.in_sync == {"s"}, what="the slave in sync")
            end = put(rm, b"never acked")
            answered: list[Code] = []
            assert rm.park(end, answered.append) is None
            clock.advance(0.15)
            assert rm.in_sync_silence() == pytest.approx(0.15)
            assert rm.lag(rm.links["s"]) == (end, pytest.approx(0.15))
            assert not answered
            clock.advance(0.1)  # past timeout_s on the master's clock
            await until(lambda: answered, what="the parked send timed out")
            assert answered == [Code.FLUSH_SLAVE_TIMEOUT]
            assert rm.counters["slave_timeouts"] == 1
            await until(lambda: not rm.in_sync, what="the slave out of the set")
            assert rm.links["s"].open  # still linked: no longer waited for
            assert rm.park(end, answered.append) == Code.SLAVE_NOT_AVAILABLE
            await slave.ack(end)  # caught up: back in
            await until(lambda: rm.in_sync == {"s"}, what="the slave back in the set")
            assert rm.park(end, answered.append) == Code.OK
            slave.close()

    asyncio.run(main())
    # left the record before the local set; joined the local set before the record
    assert record.writes == [(frozenset({"s"}), frozenset({"s"})),
                             (frozenset(), frozenset({"s"})),
                             (frozenset({"s"}), frozenset({"s"}))]


def test_a_slave_gone_fails_parked_sends_at_once_not_after_the_timeout(stores):
    master_store, _ = stores
    record = Recorded()

    async def main():
        async with replicating(master_store, ManualClock(), record=record) as (rm, addr):
            slave, _kind, _doc = await HandSlave.link(addr, master_store)
            await until(lambda: rm.in_sync == {"s"}, what="the slave in sync")
            answered: list[Code] = []
            assert rm.park(put(rm, b"parked"), answered.append) is None
            slave.close()
            await until(lambda: answered, what="the parked send answered")
            assert answered == [Code.SLAVE_NOT_AVAILABLE]
            assert rm.links == {} and rm.in_sync == set()
            assert rm.counters["slave_timeouts"] == 0  # the 30 s were not waited

    asyncio.run(main())
    assert record.sets == [frozenset({"s"}), frozenset()]


def test_while_the_record_cannot_change_a_gone_slave_is_still_waited_for(stores, caplog):
    master_store, _ = stores
    record = Recorded()

    async def main():
        async with replicating(master_store, ManualClock(), record=record) as (rm, addr):
            slave, _kind, _doc = await HandSlave.link(addr, master_store)
            await until(lambda: rm.in_sync == {"s"}, what="the slave in sync")
            answered: list[Code] = []
            assert rm.park(put(rm, b"parked"), answered.append) is None
            record.away = ConnectionError("ZooKeeper away")
            slave.close()
            await until(lambda: record.refused, what="the shrink tried")
            await settle()
            # it may still be promoted: the stricter set stays, the send keeps waiting
            assert rm.in_sync == {"s"} and "s" not in rm.links and not answered
            assert rm.in_sync_silence() == math.inf
            record.away = None  # back: tried again, recorded, then applied
            await until(lambda: answered, what="the parked send answered")
            assert answered == [Code.SLAVE_NOT_AVAILABLE] and rm.in_sync == set()
            assert rm.in_sync_silence() is None

    with caplog.at_level(logging.ERROR, logger="floodgate.ha"):
        asyncio.run(main())
    assert "could not record the in-sync set of group g" in caplog.text
    assert record.sets == [frozenset({"s"}), frozenset()]


def test_a_slave_joins_once_it_holds_what_was_appended_since_the_start_and_keeps_up(stores):
    master_store, _ = stores
    clock, record = ManualClock(), Recorded()
    before = [master_store.put("orders", 0, b"old %d" % i).end_offset for i in range(3)][-1]

    async def main():
        async with replicating(master_store, clock, record=record) as (rm, addr):
            slave, _kind, _doc = await HandSlave.link(addr, master_store)  # from offset 0
            await settle()
            assert rm.in_sync == set() and record.writes == []
            [row] = rm.figures()
            assert (row["lag_bytes"], row["in_sync"]) == (before, False)
            later = put(rm, b"new")
            clock.advance(JOIN_LAG_S * 2)
            await slave.ack(before)  # all it lacked at the start, but a second behind now
            await until(lambda: rm.acked["s"] == before, what="the ack")
            await settle()
            assert rm.in_sync == set() and record.writes == []
            await slave.ack(later)
            await until(lambda: rm.in_sync == {"s"}, what="the slave in sync")
            slave.close()

    asyncio.run(main())
    assert record.sets == [frozenset({"s"})]


def test_hellos_that_do_not_belong_are_refused_with_why_and_closed(stores):
    master_store, _ = stores
    size = master_store.commitlog.allocator.size
    role = {"master": True}

    async def main():
        async with replicating(master_store, ManualClock(), role=role) as (rm, addr):
            for hello, reason in (
                    ({"group": "other"}, "slave of group 'other' at the master of 'g'"),
                    ({"segment_bytes": size // 2},
                     f"segment size {size // 2} differs from the master's {size}"),
                    ({"epoch": 2}, "slave knows epoch 2, this master has 1")):
                slave, kind, doc = await HandSlave.link(addr, master_store, **hello)
                assert (kind, doc) == (wire.REFUSE, {"reason": reason})
                assert await slave.closed()
            role["master"] = False
            slave, kind, doc = await HandSlave.link(addr, master_store)
            assert (kind, doc) == (wire.REFUSE, {"reason": "not the master of group g"})
            assert await slave.closed()
            assert rm.links == {} and rm.in_sync == set()
            assert rm.counters["links_refused"] == 4

    asyncio.run(main())


def test_a_slave_ahead_is_told_where_to_cut_and_one_behind_the_kept_log_is_refused(stores):
    master_store, _ = stores
    for i in range(100):  # 100 KiB: two segments of 64 KiB
        master_store.put("orders", 0, bytes([i]) * 1024)
    end = master_store.commitlog.write_offset

    async def main():
        async with replicating(master_store, ManualClock()) as (rm, addr):
            # it holds bytes this master never wrote: cut back to where the logs agree
            slave, kind, doc = await HandSlave.link(addr, master_store, offset=end + 500)
            assert (kind, doc) == (wire.TRUNCATE, {"offset": end, "epoch": 1})
            assert await slave.closed()
            assert rm.counters["truncations_ordered"] == 1
            assert master_store.commitlog.delete_oldest() is not None  # retention
            oldest = master_store.commitlog.min_offset
            slave, kind, doc = await HandSlave.link(addr, master_store, offset=0)
            assert kind == wire.REFUSE
            assert doc["reason"] == (f"slave at 0 is below the master's oldest kept offset "
                                     f"{oldest}: copy a recent store to it")
            assert await slave.closed()
            assert rm.links == {}

    asyncio.run(main())


def test_a_slave_that_links_again_replaces_its_old_link(stores):
    master_store, _ = stores

    async def main():
        async with replicating(master_store, ManualClock()) as (rm, addr):
            first, _kind, _doc = await HandSlave.link(addr, master_store)
            await until(lambda: rm.in_sync == {"s"}, what="the slave in sync")
            second, kind, _doc = await HandSlave.link(addr, master_store)
            assert kind == wire.WELCOME
            assert await first.closed()  # the old link is dropped
            assert list(rm.links) == ["s"] and rm.links["s"].open
            assert rm.in_sync == {"s"}
            answered: list[Code] = []
            end = put(rm, b"x")
            assert rm.park(end, answered.append) is None
            await second.ack(end)  # the new link's acks count
            await until(lambda: answered, what="the parked send answered")
            assert answered == [Code.OK]
            second.close()

    asyncio.run(main())


def test_stopping_closes_the_links_and_answers_parked_sends_not_master(stores):
    master_store, _ = stores

    async def main():
        async with replicating(master_store, ManualClock()) as (rm, addr):
            slave, _kind, _doc = await HandSlave.link(addr, master_store)
            await until(lambda: rm.in_sync == {"s"}, what="the slave in sync")
            answered: list[Code] = []
            assert rm.park(put(rm, b"parked"), answered.append) is None
            rm.stop()
            assert answered == [Code.NOT_MASTER]
            assert await slave.closed()
            assert rm.links == {}

    asyncio.run(main())
