"""The master's side of replication (`ReplicationMaster`) with real stores, its HA port
on a real socket and the master's clock in the test's hand: a slave that keeps up gets
the log and joins the in-sync set, locally before the group record says so; a parked
send is answered once the slave's acks cover it; a slave that stops acking times the
send out on the master's clock and leaves the set (recorded first), and comes back once
caught up; one that goes away fails parked sends at once, unless the record cannot be
changed; a slave joins only once it holds what the master appended since it started."""

from __future__ import annotations

import asyncio
import logging
import math

import pytest

from broker_core.ha import wire
from broker_core.ha.epochs import EpochFile
from broker_core.ha.master import JOIN_LAG_S
from broker_core.ha.master_figures import in_sync_silence, slave_figures
from broker_core.ha.slave import MasterInfo, ReplicaClient
from broker_core.protocol import Code
from tests.broker_core.ha.master_kit import (
    HandSlave,
    Recorded,
    put,
    replicating,
    settle,
    stores_fixture,
)
from tests.clock import ManualClock
from tests.waiting import until

pytestmark = pytest.mark.timeout(60)

stores = pytest.fixture(stores_fixture)


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
                return slave_figures(rm), dict(rm.counters), ends[-1]
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
            assert in_sync_silence(rm) == pytest.approx(0.15)
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


async def parked_behind_a_slave(rm, addr, master_store) -> tuple[HandSlave, list[Code]]:
    """A slave linked and in sync, and a send parked until its acks cover it: (the slave,
    the send's answers)."""
    slave, _kind, _doc = await HandSlave.link(addr, master_store)
    await until(lambda: rm.in_sync == {"s"}, what="the slave in sync")
    answered: list[Code] = []
    assert rm.park(put(rm, b"parked"), answered.append) is None
    return slave, answered


def test_a_slave_gone_fails_parked_sends_at_once_not_after_the_timeout(stores):
    master_store, _ = stores
    record = Recorded()

    async def main():
        async with replicating(master_store, ManualClock(), record=record) as (rm, addr):
            slave, answered = await parked_behind_a_slave(rm, addr, master_store)
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
            slave, answered = await parked_behind_a_slave(rm, addr, master_store)
            record.away = ConnectionError("ZooKeeper away")
            slave.close()
            await until(lambda: record.refused, what="the shrink tried")
            await settle()
            # it may still be promoted: the stricter set stays, the send keeps waiting
            assert rm.in_sync == {"s"} and "s" not in rm.links and not answered
            assert in_sync_silence(rm) == math.inf
            record.away = None  # back: tried again, recorded, then applied
            await until(lambda: answered, what="the parked send answered")
            assert answered == [Code.SLAVE_NOT_AVAILABLE] and rm.in_sync == set()
            assert in_sync_silence(rm) is None

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
            [row] = slave_figures(rm)
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
