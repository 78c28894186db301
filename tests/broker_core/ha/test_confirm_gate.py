"""A sync master's confirm offset (store.confirm_gate): readers see a message once every
in-sync slave holds it, never a message a failover could cut; with no slave in sync the
master alone confirms; a restart rebuilds what the gate held."""

from __future__ import annotations

import asyncio

import pytest

from broker_core.client.connection import Connection
from broker_core.ha.master import ReplicationMaster
from broker_core.protocol import Code, Op, OutMessage, encode_send
from broker_core.protocol.conditional import PROP_EXPECT_OFFSET, conflict_at
from broker_core.store import GetStatus, MessageStore
from broker_core.store.confirm_gate import ConfirmGate
from tests.broker_core.ha.conftest import frozen_pair
from tests.broker_core.ha.master_kit import HandSlave, put, replicating, stores_fixture
from tests.clock import ManualClock
from tests.waiting import until

stores = pytest.fixture(stores_fixture)


def readable(store: MessageStore) -> list[bytes]:
    return [m.body for m in store.get("orders", 0, 0, 32).messages]


def test_readers_see_a_message_once_the_in_sync_slave_acked_it(stores):
    master_store, _ = stores

    async def main():
        async with replicating(master_store, ManualClock()) as (rm, addr):
            told: list[set] = []
            rm.readable = told.append
            slave, _kind, _doc = await HandSlave.link(addr, master_store)
            await until(lambda: rm.in_sync == {"s"}, what="the slave in sync")
            ends = [put(rm, b"m%d" % i) for i in range(3)]
            # stored and numbered, not readable: the slave holds none of it yet
            assert master_store.get("orders", 0, 0).status is GetStatus.NO_NEW_MSG
            assert master_store.queue_offsets("orders", 0) == (0, 0)
            assert master_store.next_queue_offset("orders", 0) == 3
            seen_when_answered: list[list[bytes]] = []
            assert rm.park(ends[0], lambda code: seen_when_answered.append(
                readable(master_store))) is None
            await slave.ack(ends[0])
            await until(lambda: seen_when_answered, what="the first send answered")
            # readable before its send is answered: a consumer woken by the answer finds it
            assert seen_when_answered == [[b"m0"]]
            assert told == [{("orders", 0)}]
            await slave.ack(ends[2])
            await until(lambda: len(told) == 2, what="the rest confirmed")
            got = master_store.get("orders", 0, 0, 32).messages
            assert [(m.body, m.queue_offset) for m in got] == [
                (b"m0", 0), (b"m1", 1), (b"m2", 2)]
            slave.close()

    asyncio.run(main())


def test_a_message_is_found_by_key_once_readable_and_not_before(stores):
    """Its keys wait at the gate with its queue unit: a lookup by key finds no message a
    failover could cut (a raft leader's records no majority holds yet, too)."""
    master_store, _ = stores

    def found(key: str) -> list[bytes]:
        return [m.body for m in master_store.query_by_key(key).messages]

    async def main():
        async with replicating(master_store, ManualClock()) as (rm, addr):
            slave, _kind, _doc = await HandSlave.link(addr, master_store)
            await until(lambda: rm.in_sync == {"s"}, what="the slave in sync")
            end = master_store.put("orders", 0, b"keyed", keys="order-7").end_offset
            rm.appended(end)
            before = found("order-7")
            await slave.ack(end)
            await until(lambda: readable(master_store) == [b"keyed"], what="confirmed")
            slave.close()
            return before, found("order-7")

    before, after = asyncio.run(main())
    assert before == [] and after == [b"keyed"]


def test_the_master_alone_confirms_when_no_slave_is_in_sync(stores):
    master_store, _ = stores
    clock = ManualClock()

    async def main():
        async with replicating(master_store, clock, timeout_s=0.2) as (rm, addr):
            told: list[set] = []
            rm.readable = told.append
            assert readable(master_store) == [] and not rm.in_sync
            put(rm, b"alone")  # no slave at all: readable at once
            assert readable(master_store) == [b"alone"]
            slave, _kind, _doc = await HandSlave.link(addr, master_store)
            await slave.ack(master_store.commitlog.write_offset)
            await until(lambda: rm.in_sync == {"s"}, what="the slave in sync")
            put(rm, b"held")
            assert readable(master_store) == [b"alone"]
            clock.advance(0.25)  # the slave never acks: it leaves the set
            await until(lambda: not rm.in_sync, what="the slave out of the set")
            assert readable(master_store) == [b"alone", b"held"]
            assert told == [{("orders", 0)}]
            put(rm, b"after")
            assert readable(master_store) == [b"alone", b"held", b"after"]
            slave.close()

    asyncio.run(main())


def test_a_demoted_master_puts_what_it_held_in_its_queues(stores):
    """A demoted master's queues must hold its whole log: the new master's truncation
    then cuts the queues with the log (held units left out would never be rebuilt)."""
    master_store, _ = stores

    async def main():
        role = {"master": True}
        async with replicating(master_store, ManualClock(), role=role) as (rm, addr):
            slave, _kind, _doc = await HandSlave.link(addr, master_store)
            await until(lambda: rm.in_sync == {"s"}, what="the slave in sync")
            end = put(rm, b"unacked")
            answered: list[Code] = []
            rm.park(end, answered.append)
            assert readable(master_store) == []  # held while it led
            role["master"] = False
            rm.stop()
            assert answered == [Code.NOT_MASTER]
            assert readable(master_store) == [b"unacked"]
            assert not master_store.gate.holding
            slave.close()

    asyncio.run(main())


def test_a_restart_rebuilds_the_units_the_gate_held(tmp_path, small_config):
    """The checkpoint stays at the oldest record held: recovery rebuilds its unit (a
    checkpoint past it lost the message from its queue for good)."""
    store = MessageStore(tmp_path / "m", small_config())
    store.put("orders", 0, b"confirmed")
    gate = store.gate = ConfirmGate()
    gate.active = True
    held = store.put("orders", 0, b"held")
    assert held.queue_offset == 1
    store.commitlog.flush()
    assert store.cq_flush.run_once(force=True) == held.physical_offset
    store.close()
    again = MessageStore(tmp_path / "m", small_config())
    try:
        got = again.get("orders", 0, 0, 32).messages
        assert [(m.body, m.queue_offset) for m in got] == [(b"confirmed", 0), (b"held", 1)]
        assert again.put("orders", 0, b"next").queue_offset == 2
    finally:
        again.close()


def test_the_gate_is_a_sync_masters_only(tmp_path, small_config):
    store = MessageStore(tmp_path / "a", small_config())
    try:
        ReplicationMaster(store, "g", sync=False, timeout_s=1, epoch=lambda: 1,
                          history=lambda: None, is_master=lambda: True, meta=dict)
        assert store.gate is None  # async: readers see what the master holds
    finally:
        store.close()


def test_a_conflict_reports_only_an_end_the_in_sync_slaves_hold(tmp_path):
    """A conditional send refused CONFLICT says where the queue ends (the chaos drill's
    register reads it so): an end that counts a record the slave does not hold would be a
    read a failover takes back. It waits for the slave like a send, and is answered
    UNACKNOWLEDGED (send again) when the slave does not confirm it in time."""

    def send(addr: str, expect: int | None) -> tuple[int, bytes]:
        props = {PROP_EXPECT_OFFSET: str(expect)} if expect is not None else {}
        conn = Connection(addr)
        try:
            return conn.call(Op.SEND, encode_send("orders", 0, OutMessage(b"v", "", "", props)),
                             timeout=5.0)
        finally:
            conn.close()

    async def main():
        m, s = await frozen_pair(tmp_path, sync_timeout_s=0.5)  # the slave stays waited for
        try:
            await until(lambda: "s" in m.node.master.in_sync, what="the slave in sync")
            assert (await asyncio.to_thread(send, m.addr, 0))[0] == Code.OK
            code, body = await asyncio.to_thread(send, m.addr, 0)
            assert code == Code.CONFLICT and conflict_at(body.decode()) == 1
            await s.node.step_down("paused for the test")  # no acks from now on
            assert (await asyncio.to_thread(send, m.addr, None))[0] == \
                Code.FLUSH_SLAVE_TIMEOUT  # stored on the master alone: the end is 2 there
            code, body = await asyncio.to_thread(send, m.addr, 0)
            assert code == Code.UNACKNOWLEDGED, body  # not "at 2": the slave never held it
            assert len(m.broker.store.get("orders", 0, 0, 32).messages) == 1
        finally:
            await s.close()
            await m.close()

    asyncio.run(main())
