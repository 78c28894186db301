"""The master's links (`ReplicationMaster`): HELLOs that do not belong are answered with
why, or told where to cut; a slave linking again replaces its old link; stopping closes
the links and answers parked sends NOT_MASTER."""

from __future__ import annotations

import asyncio

import pytest

from broker_core.ha import wire
from broker_core.protocol import Code
from tests.broker_core.ha.master_kit import HandSlave, put, replicating, stores_fixture
from tests.clock import ManualClock
from tests.waiting import until

pytestmark = pytest.mark.timeout(60)

stores = pytest.fixture(stores_fixture)


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
