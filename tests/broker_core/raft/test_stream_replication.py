"""The two ends of a raft group's stream (raft.stream_replication) on real stores and a
real socket, the leader's clock in the test's hand: a send is answered once a majority
holds it, never by counting bytes of an older term alone (the Raft paper's 5.4.2), and
readers see it only then; a leader that stops keeps what no majority holds out of its
queues; a follower shows readers only what the leader says is committed."""

from __future__ import annotations

import asyncio

import pytest

from broker_core.ha import wire
from broker_core.ha.epochs import EpochFile, EpochHistory
from broker_core.ha.slave import MasterInfo
from broker_core.protocol import Code
from broker_core.raft.stream_replication import QuorumMaster, StreamFollower
from tests.broker_core.ha.master_kit import HandSlave, stores_fixture
from tests.clock import ManualClock
from tests.waiting import until

pytestmark = pytest.mark.timeout(60)

stores = pytest.fixture(stores_fixture)


def readable(store) -> int:
    """How many messages of orders-0 a reader finds."""
    return len(store.get("orders", 0, 0, 1000).messages)


async def leading(store, term_start: int, history: list, voters=("m", "a", "b")):
    master = QuorumMaster(store, "g", "m", lambda: frozenset(voters), lambda: frozenset(voters),
                          lambda start, end: [], timeout_s=30.0,
                          epoch=lambda: 2, history=lambda: EpochHistory(history),
                          is_master=lambda: True, meta=lambda: {"topics": {}},
                          clock=ManualClock())
    server = await asyncio.get_running_loop().create_server(master.link_factory,
                                                             "127.0.0.1", 0)
    master.term_start = term_start
    master.start()
    return master, server, f"127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def streamed(slave: HandSlave, upto: int) -> None:
    """Read the leader's DATA frames until one reaches `upto`."""
    while True:
        kind, body = await asyncio.wait_for(wire.read_frame(slave.reader), 5)
        if kind == wire.DATA:
            at, _end, _ms, _epoch, _commit, chunk = wire.decode_data(body)
            if at + len(chunk) >= upto:
                return


def put(master, body: bytes) -> int:
    end = master.store.put("orders", 0, body).end_offset
    master.appended(end)
    return end


def test_a_majority_answers_a_send_and_an_older_terms_tail_waits_for_one_of_its_own(stores):
    store, _other = stores
    older = [store.put("orders", 0, b"old-%d" % i).end_offset for i in range(3)]
    store.replica_log().withdraw(0)  # an older term's records, not known committed
    answers: list[tuple[str, Code]] = []

    async def main():
        master, server, addr = await leading(store, older[-1], [(1, 0), (2, older[-1])])
        store.replica_log().publish(older[-1], crc=True, gate=master.gate)
        try:
            a, kind, _doc = await HandSlave.link(addr, store, name="a", epoch=2)
            assert master.park(older[-1], lambda code: answers.append(("old", code))) is None
            await streamed(a, older[-1])
            await a.ack(older[-1])  # a majority (m, a) holds the tail: not enough
            await asyncio.sleep(0.05)
            parked_after_tail = (list(answers), readable(store))
            own = put(master, b"new")
            assert master.park(own, lambda code: answers.append(("new", code))) is None
            await streamed(a, own)
            await a.ack(own)  # and its own record: everything up to it is committed
            await until(lambda: len(answers) == 2, what="both sends answered")
            return parked_after_tail, readable(store), master.commit_offset(), own
        finally:
            master.stop()
            server.close()

    (early, seen_early), seen, commit, own = asyncio.run(main())
    assert early == [] and seen_early == 0
    assert answers == [("old", Code.OK), ("new", Code.OK)]
    assert seen == 4 and commit == own


def test_a_leader_that_stops_keeps_what_no_majority_holds_out_of_its_queues(stores):
    store, _other = stores
    answers: list[Code] = []

    async def main():
        master, server, _addr = await leading(store, 0, [(2, 0)])
        try:
            ends = [put(master, b"m%d" % i) for i in range(3)]
            assert master.park(ends[-1], answers.append) is None
            master.stop()
            return ends, master.gate.holding
        finally:
            server.close()

    ends, holding = asyncio.run(main())
    assert not holding  # (a later term of this leader would show them twice)
    assert answers == [Code.NOT_MASTER]  # not acknowledged
    assert readable(store) == 0  # not shown: the next leader may not hold them
    replica = store.replica_log()
    assert max(replica.received, replica.offset) == ends[-1]  # their bytes kept


def test_a_follower_shows_readers_what_the_leader_says_is_committed(tmp_path, stores):
    leader_store, follower_store = stores
    end = [follower_store.commitlog.write_offset]
    acks: list[int] = []

    async def main():
        master, server, addr = await leading(leader_store, 0, [(2, 0)])
        follower = StreamFollower(
            follower_store, EpochFile(tmp_path / "epochs.json"), "a", "g",
            MasterInfo("m", addr, 2), known_epoch=lambda: 2, on_records=lambda t: None,
            on_meta=lambda doc: None, on_truncate=lambda offset, cut: None, log_end=end,
            on_config=lambda offset, members: None)
        follower.start()
        try:
            await until(lambda: "a" in master.links, what="the follower linked")
            ends = [put(master, b"m%d" % i) for i in range(5)]
            await until(lambda: master.acked.get("a") == ends[-1], what="acked to the end")
            acks.append(master.acked["a"])
            # the acks made the leader's commit; the follower learns it with what comes next
            shown_before = readable(follower_store)
            last = put(master, b"m5")
            await until(lambda: readable(follower_store) == 5, what="the first five shown")
            follower.publish(master.commit_offset())  # a beat's commit
            await until(lambda: readable(follower_store) == 6, what="the sixth shown")
            return shown_before, last
        finally:
            await follower.stop()
            master.stop()
            server.close()

    shown_before, last = asyncio.run(main())
    assert shown_before == 0  # held, not shown, until the leader says a majority holds it
    assert end[0] == last  # the follower's log ends where the leader's does


def retention_removed_the_first_segment(store) -> int:
    """Fill the leader's log past two segments and delete the first; its new first byte."""
    while len(store.commitlog.segments) < 3:
        store.put("orders", 0, b"x" * 4000)
    store.commitlog.delete_oldest()
    for cq in store.queue_table.all():
        cq.delete_below(store.commitlog.min_offset)
    return store.commitlog.min_offset


def following(store, path, addr: str, end: list[int]) -> StreamFollower:
    return StreamFollower(
        store, EpochFile(path / "epochs.json"), "a", "g", MasterInfo("m", addr, 2),
        known_epoch=lambda: 2, on_records=lambda t: None, on_meta=lambda doc: None,
        on_truncate=lambda offset, cut: None, log_end=end,
        on_config=lambda offset, members: None)


def test_an_empty_member_begins_its_log_at_the_leaders_first_byte(tmp_path, stores):
    """Retention removed the leader's first segment: an empty member (a new replica, or
    one whose store an operator emptied) is fed from the leader's first byte. Its log
    and its queues begin there; readers find on it what they find on the leader."""
    leader_store, follower_store = stores
    first = retention_removed_the_first_segment(leader_store)
    end = [0]

    async def main():
        master, server, addr = await leading(leader_store, 0, [(2, 0)])
        follower = following(follower_store, tmp_path, addr, end)
        follower.start()
        try:
            await until(lambda: "a" in master.links, what="the follower linked")
            last = put(master, b"after")
            await until(lambda: master.acked.get("a") == last, what="acked to the end")
            follower.publish(master.commit_offset())
            return last
        finally:
            await follower.stop()
            master.stop()
            server.close()

    last = asyncio.run(main())
    assert first > 0 and end[0] == last
    assert follower_store.commitlog.min_offset == first
    ours = follower_store.queue_table.get_or_create("orders", 0)
    theirs = leader_store.queue_table.get_or_create("orders", 0)
    assert (ours.min_offset, ours.max_offset) == (theirs.min_offset, theirs.max_offset)
    got = follower_store.get("orders", 0, ours.min_offset, 1000).messages
    want = leader_store.get("orders", 0, theirs.min_offset, 1000).messages
    assert [m.body for m in got] == [m.body for m in want] and got[-1].body == b"after"


def test_a_member_whose_log_ends_before_the_leaders_first_byte_is_refused_saying_why(
        tmp_path, stores):
    """A member that holds bytes, all of them before the leader's first (retention
    removed what lies between), cannot be caught up from the stream. It is refused at
    once, and the leader keeps why (with what to do), so that an operator's add-replica
    fails saying so rather than after its minute of waiting."""
    store, _other = stores
    first = retention_removed_the_first_segment(store)

    async def main():
        master, server, addr = await leading(store, 0, [(2, 0)], voters=("m", "a", "b", "d"))
        try:
            _d, kind, doc = await HandSlave.link(addr, store, name="d", epoch=2, offset=500,
                                                 history=[[2, 0]])
            return kind, doc, dict(master.behind)
        finally:
            master.stop()
            server.close()

    kind, doc, behind = asyncio.run(main())
    assert first > 0 and kind == wire.REFUSE
    assert doc["reason"] == behind["d"]
    assert f"before the leader's first byte {first}" in behind["d"]
    assert "remove its data directory" in behind["d"]
