"""Raft groups of real brokers (store, TCP, Raft links) on one loop: a leader elected
by the members alone takes sends and answers each once a majority holds it; every
member's log is byte-identical and its readers see every acknowledged message; a
follower refuses sends naming the leader; the leader stopped, another takes over
within the election timeout and nothing acknowledged is lost; the old leader comes
back as a follower and catches up."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from broker_core.client.aio_producer import AsyncProducer
from broker_core.client.attempts import SendFailed
from broker_core.errors import BrokerError
from broker_core.observe.prometheus import ha_families
from broker_core.protocol import Code
from tests.broker_core.ha.conftest import log_bytes
from tests.broker_core.raft.members import Group
from tests.waiting import until

pytestmark = pytest.mark.timeout(60)


async def produce(addr: str, n: int, first: int = 0, topic: str = "orders"):
    async with AsyncProducer([addr], fuse=False, timeout=5.0, retries=0) as p:
        return await asyncio.gather(*(p.send(topic, f"m{i}".encode() * 20, keys=f"k{i}")
                                      for i in range(first, first + n)))


def readable(member, topic: str = "orders") -> list[bytes]:
    store = member.broker.store
    return sorted(m.body for q in store.queues() if q[0] == topic
                  for m in store.get(*q, 0, 100_000).messages)


def test_the_members_elect_a_leader_that_answers_once_a_majority_holds_it(tmp_path):
    async def main():
        g = Group(tmp_path)
        await g.start_all()
        try:
            leader = await g.leader()
            # 800 (~175 KB): past two 64 KiB segments whatever the blanks at their ends
            results = await produce(leader.addr, 800)
            assert {r.status for r in results} == {"SEND_OK"}
            want = sorted(f"m{i}".encode() * 20 for i in range(800))
            assert readable(leader) == want
            end = leader.broker.store.commitlog.write_offset  # committed: a majority holds it
            assert sum(m.group.end() >= end for m in g.members.values()) >= 2
            # the third catches up
            await until(lambda: all(readable(m) == want for m in g.members.values()))
            figures = leader.group.figures()  # what /stats and /metrics say of the group
            assert (figures["consensus"], figures["members"], figures["role"]) == \
                ("raft", 3, "MASTER")
            await until(lambda: len(leader.group.figures()["in_sync"]) == 2)
            families = {f.name: f for f in ha_families(leader.name, leader.group.figures())}
            match = families["floodgate_raft_match_index"].samples
            assert sorted(s.labels["replica"] for s in match) == sorted(
                m.name for m in g.members.values() if m is not leader)
            assert {s.value for s in match} == {leader.group.master.committed}
            # byte-identical, once each has what is committed (the tables' record, written
            # as the sends moved them, may still be on its way to one)
            await until(lambda: len({log_bytes(m.broker) for m in g.members.values()}) == 1)
            assert len(leader.broker.store.commitlog.segments) > 2
            follower = next(m for m in g.members.values() if m is not leader)
            with pytest.raises(SendFailed) as err:
                await produce(follower.addr, 1)
            assert err.value.code == Code.NOT_MASTER
            assert f"master is {leader.name} at {leader.addr}" in str(err.value)
            assert follower.broker.store.query_by_key("k7")  # the key index, from committed
        finally:
            await g.close()

    asyncio.run(main())


def test_a_stopped_leader_is_replaced_and_nothing_acknowledged_is_lost(tmp_path):
    async def main():
        g = Group(tmp_path, flush="sync")
        await g.start_all()
        try:
            old = await g.leader()
            acked = await produce(old.addr, 300)
            await g.stop(old.name)
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            new = await g.leader()
            took = loop.time() - t0
            assert new.name != old.name and took < 2.0, took
            more = await produce(new.addr, 300, first=300)
            assert {r.status for r in acked + more} == {"SEND_OK"}
            want = sorted(f"m{i}".encode() * 20 for i in range(600))
            assert readable(new) == want
            back = await g.start(old.name)  # the old leader comes back: a follower now
            await until(lambda: readable(back) == want)
            assert back.group.role.value == "SLAVE" and g.leaders() == [new]
            await until(lambda: log_bytes(back.broker) == log_bytes(new.broker))
        finally:
            await g.close()

    asyncio.run(main())


def test_the_groups_tables_are_committed_records_and_outlive_their_leader(tmp_path):
    """Consumer offsets (and the other tables a master hands its slaves) go through the
    log: each member adopts them as they are committed; the next leader goes on from
    there."""
    async def main():
        g = Group(tmp_path)
        await g.start_all()
        try:
            leader = await g.leader()
            await produce(leader.addr, 40)
            leader.broker.offsets.commit("billing", "orders", 1, 7)
            await until(lambda: all(m.broker.offsets.get("billing", "orders", 1) == 7
                                    for m in g.members.values()))
            await g.stop(leader.name)
            new = await g.leader()
            assert new.broker.offsets.get("billing", "orders", 1) == 7
            new.broker.offsets.commit("billing", "orders", 1, 9)
            await until(lambda: all(m.broker.offsets.get("billing", "orders", 1) == 9
                                    for m in g.members.values()))
            assert "%RAFT_META%" not in new.broker.topics.queues  # not a topic clients see
        finally:
            await g.close()

    asyncio.run(main())


def test_an_idempotent_retry_is_answered_from_its_first_try_even_before_it_is_committed(
        tmp_path):
    """A retry reaching the leader while its first try waits for a majority, and one
    reaching the next leader (which reads the sends its log holds, committed or not):
    each answered with the first try's offset, the message stored once."""
    from broker_core import protocol as p
    from broker_core.protocol import Op
    from broker_core.protocol.idempotence import with_id

    def send(member, seq: int, body: bytes):
        frame = with_id(0x5EED, seq, p.encode_send("idem", 0, p.OutMessage(body)))
        header = p.Header(op=Op.SEND, flags=p.FLAG_IDEMPOTENT, code=0, request_id=1,
                          length=len(frame))
        return member.broker.handle(header, frame)

    def offset(answer):  # the queue offset and the physical one: where it is stored
        code, body = answer
        assert code == Code.OK, body
        return p.decode_send_answer(body)[1:3]

    async def main():
        g = Group(tmp_path)
        await g.start_all()
        try:
            leader = await g.leader()
            first, again = await asyncio.gather(send(leader, 0, b"once"),
                                                send(leader, 0, b"once"))
            assert offset(first) == offset(again) and offset(first)[0] == 0
            await g.stop(leader.name)
            new = await g.leader()
            assert offset(await send(new, 0, b"once")) == offset(first)
            assert offset(await send(new, 1, b"twice"))[0] == 1
            await until(lambda: all(readable(m, "idem") == [b"once", b"twice"]
                                    for m in g.members.values()))
        finally:
            await g.close()

    asyncio.run(main())


def test_conditional_sends_on_a_leader_count_what_it_has_not_committed(tmp_path):
    """Compare-and-sets on a queue's end: two in one loop turn, the second expecting the
    first's offset, both stored; a refusal (CONFLICT) answered once an entry proposed
    after it is committed (the leader surely led when it looked)."""
    from broker_core import protocol as p
    from broker_core.protocol import Op
    from broker_core.protocol.conditional import PROP_EXPECT_OFFSET, conflict_at

    def cas(member, expect: int):
        frame = p.encode_send("reg", 0, p.OutMessage(b"v%d" % expect, properties={
            PROP_EXPECT_OFFSET: str(expect)}))
        return member.broker.handle(p.Header(op=Op.SEND, flags=0, code=0, request_id=1,
                                             length=len(frame)), frame)

    async def main():
        g = Group(tmp_path)
        await g.start_all()
        try:
            leader = await g.leader()
            a, b = await asyncio.gather(cas(leader, 0), cas(leader, 1))
            assert (a[0], b[0]) == (Code.OK, Code.OK)
            before = leader.group.master.committed
            code, text = await cas(leader, 1)
            assert code == Code.CONFLICT and conflict_at(text.decode()) == 2
            assert leader.group.master.committed > before  # its barrier, committed first
        finally:
            await g.close()

    asyncio.run(main())


def test_the_leader_looks_at_its_tables_between_sends_not_at_every_one(tmp_path):
    """The tables' version is a sum over every table: summed at each step of the core it
    was three times a send at one in flight. It is looked at every META_LOOK_S, and a
    table that changed still reaches every member."""
    from broker_core.raft.tables_record import META_LOOK_S

    async def main():
        g = Group(tmp_path)
        await g.start_all()
        try:
            leader = await g.leader()
            broker, looks = leader.broker, []
            version = broker.meta_version
            broker.meta_version = lambda: looks.append(1) or version()  # counted, unchanged
            loop = asyncio.get_running_loop()
            start = loop.time()
            for _ in range(1000):  # what each Append, answer and beat drives
                leader.group.drive([])
            took = loop.time() - start
            assert len(looks) <= 2 + took / META_LOOK_S, (len(looks), took)
            broker.offsets.commit("billing", "orders", 2, 11)
            await until(lambda: all(m.broker.offsets.get("billing", "orders", 2) == 11
                                    for m in g.members.values()))
        finally:
            await g.close()

    asyncio.run(main())


def test_a_beat_due_at_once_leaves_the_next_drive_whole_on_uvloop(tmp_path):
    """The brokers run on uvloop, which answers a call_at due within the millisecond
    with a plain Handle (no `when()`). A fresh leader's beats are due at once: the next
    drive (a send's proposal, a follower's answer) asked that handle when it ran and
    raised, unwinding the send's proposal or closing the link the answer came on (the
    30-minute chaos run logged 84 and 5)."""
    async def main():
        g = Group(tmp_path)
        await g.start_all()
        try:
            leader = await g.leader()
            now = asyncio.get_running_loop().time()
            for peer in leader.group.node.beat_due:
                leader.group.node.beat_due[peer] = now  # as at its election
            leader.group.drive([])  # its timer, due now
            leader.group.drive([])  # (raised AttributeError)
            assert {r.status for r in await produce(leader.addr, 20)} == {"SEND_OK"}
            await until(lambda: len(leader.group.figures()["in_sync"]) == 2)
        finally:
            await g.close()

    uvloop.run(main())


def test_a_store_holding_a_raft_log_of_entries_refuses_to_start_saying_so(tmp_path):
    """floodgate's first shape of the Raft log kept an entry index beside the CommitLog;
    read as a stream, a log without epochs would be cut to nothing by its first leader."""
    (tmp_path / "r0" / "raft" / "entries").mkdir(parents=True)

    async def main():
        with pytest.raises(BrokerError, match="holds a Raft log of entries"):
            await Group(tmp_path).start("r0")

    asyncio.run(main())
