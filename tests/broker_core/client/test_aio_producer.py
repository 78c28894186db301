"""The asyncio producer against real brokers in this process (store and TCP server on
an event loop of their own, `live_brokers.Brokers`): what a send and a batch store,
`connect` naming the brokers it cannot reach, a failed attempt retried on another
broker (one refusing connections, one that never answers), `send_nowait`'s callback
either way, the fuse keeping a failing broker out on the producer's clock, refusals
failing at once with the broker's reason, an ordered send kept on its own broker, and
close letting go of the connections and of what waits out a FLOW_CONTROL backoff."""

from __future__ import annotations

import asyncio

import pytest

from broker_core.client.admin import view_by_id
from broker_core.client.aio_producer import AsyncProducer
from broker_core.client.attempts import SendFailed, SendResult
from broker_core.client.connection import BrokerUnavailable
from broker_core.protocol import PRODUCER_GROUP, Code, OutMessage
from broker_core.protocol.delay import SCHEDULE_TOPIC
from broker_core.server import topic_admin
from broker_core.server.faults import FaultSpec
from broker_core.server.flow_control import Quota
from fuse import Fuse
from tests.broker_core.client.live_brokers import MAX_BYTES, bodies, stored
from tests.broker_core.client.test_producer import ISOLATION_OVER_S
from tests.clock import ManualClock
from tests.waiting import until, wait_for

pytestmark = pytest.mark.timeout(60)



def test_a_send_is_stored_as_sent_and_a_batch_in_one_queue_in_order(brokers, topic):
    async def main():
        async with AsyncProducer(brokers.addrs, fuse=False, group="billing") as producer:
            one = await producer.send(topic, b"paid 42", tags="paid", keys="order-42",
                                      properties={"region": "eu"})
            batch = await producer.send_batch(topic, [OutMessage(b, tags="t")
                                                      for b in (b"a", b"b", b"c")])
            return one, batch

    one, batch = asyncio.run(main())
    assert (one.status, one.attempts, one.retries) == ("SEND_OK", 1, ())
    doc, why = view_by_id(brokers.addr(one.broker), one.msg_id)
    assert doc is not None, why
    assert (doc["topic"], doc["queue_id"], doc["queue_offset"]) == \
        (topic, one.queue_id, one.queue_offset)
    assert (doc["body"], doc["tags"], doc["keys"]) == ("paid 42", "paid", "order-42")
    assert doc["properties"]["region"] == "eu"
    assert doc["properties"][PRODUCER_GROUP] == "billing"
    assert (batch.status, batch.count, batch.msg_id) == ("SEND_OK", 3, None)
    held = stored(brokers.addr(batch.broker), topic)[batch.queue_id]
    assert held[batch.queue_offset:batch.queue_offset + 3] == [b"a", b"b", b"c"]


def test_a_broker_refusing_connections_is_named_by_connect_and_passed_over(
        brokers, topic, down):
    names = {"down": down, "b1": brokers.addr("b1")}

    async def main():
        async with AsyncProducer(names, fuse=False, retries=1) as producer:
            problems = await producer.connect()
            together = await asyncio.gather(*(producer.send(topic, b"m%d" % i)
                                              for i in range(5)))  # one frame
            alone = [await producer.send(topic, b"s%d" % i) for i in range(3)]
            batch = await producer.send_batch(topic, [b"x", b"y"])
        async with AsyncProducer(names, fuse=False, retries=0) as producer:
            with pytest.raises(SendFailed) as err:  # its turn is the down broker's
                await producer.send(topic, b"lost")
            kept = await producer.send(topic, b"kept")  # the next turn
        return problems, [*together, *alone, batch, kept], err.value

    problems, results, failed = asyncio.run(main())
    assert list(problems) == ["down"] and isinstance(problems["down"], BrokerUnavailable)
    assert str(problems["down"]).startswith(f"{down}: ")
    assert {(r.status, r.broker) for r in results} == {("SEND_OK", "b1")}
    retried = [r for r in results if r.attempts == 2]
    assert retried, "the down broker was never tried"
    for r in retried:
        (why,) = r.retries
        assert why.startswith(f"down: {down}: ")
    assert failed.code is None  # no broker answered
    assert str(failed).startswith("send failed after 1 attempt(s); last from down: ")
    assert b"lost" not in bodies(brokers.addr("b1"), topic)


def test_a_broker_that_never_answers_is_given_up_after_the_timeout(brokers, topic, silent):
    async def main():  # at least once: the next broker, though the first may have stored it
        names = {"silent": silent, "b1": brokers.addr("b1")}
        async with AsyncProducer(names, fuse=False, retries=1, timeout=0.3,
                                 idempotent=False) as producer:
            return await producer.send(topic, b"late")

    r = asyncio.run(main())
    assert (r.broker, r.attempts) == ("b1", 2)
    assert r.retries == (f"silent: {silent}: no answer in 0.3 s",)
    assert bodies(brokers.addr("b1"), topic) == [b"late"]


def test_a_frame_whose_answer_was_lost_is_stored_once_and_answered_whole(brokers, topic):
    # each write held 0.5 s for 0.6 s: the frame of five is stored after the producer gave
    # up on it (0.3 s), and its retries, to the same broker, are answered from it
    brokers.call(brokers["b2"].faults.inject, FaultSpec(latency_ms=500, duration_s=0.6))

    async def main():
        names = {"b2": brokers.addr("b2"), "b1": brokers.addr("b1")}
        async with AsyncProducer(names, fuse=False, timeout=0.3, retries=6) as producer:
            return await asyncio.gather(*(producer.send(topic, b"m%d" % i) for i in range(5)))

    results = asyncio.run(main())
    assert {r.broker for r in results} == {"b2"} and min(r.attempts for r in results) >= 2
    assert [r.queue_offset - results[0].queue_offset for r in results] == [0, 1, 2, 3, 4]
    assert len({r.msg_id for r in results}) == 5
    assert bodies(brokers.addr("b2"), topic) == [b"m0", b"m1", b"m2", b"m3", b"m4"]
    assert bodies(brokers.addr("b1"), topic) == []


def test_an_idempotent_send_unanswered_is_not_sent_elsewhere(brokers, topic, silent):
    async def main():  # its first try may be stored there: elsewhere it would be twice
        names = {"silent": silent, "b1": brokers.addr("b1")}
        async with AsyncProducer(names, fuse=False, retries=1, timeout=0.3) as producer:
            with pytest.raises(SendFailed, match="may be stored on silent") as failed:
                await producer.send(topic, b"late")
            return failed.value

    failed = asyncio.run(main())
    assert [w.split(":")[0] for w in failed.retries] == ["silent", "silent"]
    assert bodies(brokers.addr("b1"), topic) == []


def test_send_nowait_calls_back_with_the_result_or_the_failure(brokers, topic, down):
    async def main():
        outcomes: list[tuple[object, BaseException | None]] = []
        async with AsyncProducer({"b1": brokers.addr("b1")}, fuse=False) as producer:
            producer.send_nowait(topic, b"fine", lambda r, e: outcomes.append((r, e)),
                                 tags="t")
            await until(lambda: len(outcomes) == 1, what="the first callback")
        async with AsyncProducer({"down": down}, fuse=False, retries=1) as producer:
            producer.send_nowait(topic, b"nowhere", lambda r, e: outcomes.append((r, e)))
            await until(lambda: len(outcomes) == 2, what="the second callback")
        return outcomes

    (ok, no_error), (no_result, failed) = asyncio.run(main())
    assert isinstance(ok, SendResult) and ok.status == "SEND_OK" and no_error is None
    assert no_result is None and isinstance(failed, SendFailed)
    assert len(failed.retries) == 2 and all(w.startswith("down: ") for w in failed.retries)
    assert bodies(brokers.addr("b1"), topic) == [b"fine"]


def test_a_broker_refusing_connections_is_kept_out_by_the_fuse_on_its_clock(
        brokers, topic, down):
    clock = ManualClock()
    fuse = Fuse(["b1", "down"], max_isolated_ratio=0.5, clock=clock)  # may isolate 1 of 2

    async def main():
        names = {"b1": brokers.addr("b1"), "down": down}
        async with AsyncProducer(names, fuse=fuse, clock=clock) as producer:
            first = [await producer.send(topic, b"m%d" % i) for i in range(6)]
            excluded = producer.fuse.excluded
            clock.advance(ISOLATION_OVER_S)  # its isolation is over: tried again
            again = [await producer.send(topic, b"n%d" % i) for i in range(4)]
            return first, excluded, again

    first, excluded, again = asyncio.run(main())
    assert {r.broker for r in first + again} == {"b1"}
    assert [r.attempts for r in first].count(2) == 1  # down once, then kept out
    assert excluded == {"down"}
    assert [r.attempts for r in again].count(2) == 1


def test_refusals_fail_at_once_with_the_brokers_reason(brokers, topic):
    brokers.call(topic_admin.put, brokers["b1"], {"topic": topic, "perm": "r"})

    async def main():
        async with AsyncProducer(brokers.addrs, retries=0, clock=ManualClock()) as producer:
            failures = {}
            for name, send in (("big", (topic, b"x" * (MAX_BYTES + 1))),
                               ("bad_name", ("no spaces here", b"x")),
                               ("own", (SCHEDULE_TOPIC, b"x"))):
                with pytest.raises(SendFailed) as err:
                    await producer.send(*send)
                failures[name] = err.value
            moved = [await producer.send(topic, b"m%d" % i) for i in range(4)]
            brokers.call(topic_admin.put, brokers["b2"], {"topic": topic, "perm": "r"})
            with pytest.raises(SendFailed) as err:
                await producer.send(topic, b"nowhere")
            failures["read_only"] = err.value
            return failures, moved, producer.fuse.snapshot()

    failures, moved, snap = asyncio.run(main())
    big = failures["big"]
    assert big.code == Code.MESSAGE_TOO_LARGE and big.retries == ()  # not tried elsewhere
    assert f"over the {MAX_BYTES}-byte limit" in str(big)
    assert failures["bad_name"].code == Code.BAD_REQUEST
    assert "illegal topic name 'no spaces here'" in str(failures["bad_name"])
    for refused in (failures["own"], failures["read_only"]):  # every broker asked
        assert refused.code == Code.NO_PERMISSION
        assert str(refused).startswith("no broker takes this send")
        assert sorted(w.split(":")[0] for w in refused.retries) == ["b1", "b2"]
    # read-only on b1: sent to b2, without spending a retry (retries=0)
    assert {r.broker for r in moved} == {"b2"} and any(r.attempts == 2 for r in moved)
    assert not snap.isolations_by_broker  # no broker held to account for any of them


def test_an_ordered_send_keeps_its_queue_and_is_retried_on_its_own_broker_only(
        brokers, topic, b3):
    names = {"b1": brokers.addr("b1"), "b3": b3}
    keys = [f"k{i}" for i in range(8)]

    async def main():
        async with AsyncProducer(names, fuse=False, retries=2) as producer:
            placed = {k: await producer.send(topic, f"{k}:0".encode(), order_key=k)
                      for k in keys}
            again = await asyncio.gather(*(producer.send(topic, f"{k}:1".encode(),
                                                         order_key=k) for k in keys))
            key = next(k for k in keys if placed[k].broker == "b3")
            queue = stored(b3, topic)[placed[key].queue_id]
            brokers.stop("b3")
            with pytest.raises(SendFailed) as err:
                await producer.send(topic, f"{key}:2".encode(), order_key=key)
            return placed, dict(zip(keys, again, strict=True)), key, queue, err.value

    placed, again, key, queue, failed = asyncio.run(main())
    assert all((again[k].broker, again[k].queue_id) == (placed[k].broker, placed[k].queue_id)
               for k in keys)
    assert [b for b in queue if b.startswith(f"{key}:".encode())] == \
        [f"{key}:0".encode(), f"{key}:1".encode()]
    assert len(failed.retries) == 3  # 1 + retries, every one on b3
    assert all(why.startswith("b3: ") for why in failed.retries)
    assert f"{key}:2".encode() not in bodies(brokers.addr("b1"), topic)


def test_close_lets_go_of_every_connection(brokers, topic, b3):
    b3_broker = brokers["b3"]

    def connections() -> int:
        return brokers.call(lambda: b3_broker.counters["connections"])

    async def main():
        producer = AsyncProducer({"b3": b3}, fuse=False)
        assert await producer.connect() == {}
        await producer.send(topic, b"x")
        await until(lambda: connections() == 1, what="the producer's connection")
        await producer.close()

    asyncio.run(main())
    wait_for(lambda: connections() == 0, 10, "the connection closed")


def test_close_fails_a_send_waiting_out_a_flow_control_backoff(brokers, topic):
    b1, addr = brokers["b1"], brokers.addr("b1")
    quota = Quota.make("topic", topic, rate=0.001, burst=1)  # one now, the next in 1000 s
    brokers.call(b1.flow.set, quota)

    async def main():
        producer = AsyncProducer({"b1": addr}, fuse=False)
        try:
            await producer.send(topic, b"first")
            waiting = asyncio.ensure_future(producer.send(topic, b"second"))
            await until(lambda: producer.counters.snapshot()["flow_control"] == 1,
                        what="throttled")
            await producer.close()
            brokers.call(b1.flow.clear, "topic", topic)  # it would pass now
            with pytest.raises(SendFailed) as err:
                await asyncio.wait_for(waiting, 5)
            return err.value
        finally:
            await producer.close()

    try:
        failed = asyncio.run(main())
    finally:
        brokers.call(b1.flow.clear, "topic", topic)
    assert failed.code == Code.FLOW_CONTROL
    assert bodies(addr, topic) == [b"first"]  # never sent after close


def test_a_link_opened_while_the_routes_moved_is_not_kept_to_the_old_master(brokers, topic):
    """A producer connecting to group g's master when the routes named another (a
    failover) kept that link: every later send of g went to the old master (a chaos run:
    NOT_MASTER for 50 s). The link it keeps goes where g's master is now."""
    b1, b2 = brokers.addr("b1"), brokers.addr("b2")

    async def main():
        async with AsyncProducer({"g": b1}, fuse=False) as p:
            opening = asyncio.ensure_future(p._conn("g"))
            await asyncio.sleep(0)  # it has read b1 and waits for the connection
            p.brokers["g"] = b2  # what _reroute does when the routes move
            conn = await opening
            assert conn.transport.get_extra_info("peername")[1] == int(b2.rsplit(":", 1)[1])
            result = await p.send(topic, b"after the move")
            assert result.status == "SEND_OK"
        assert b"after the move" in bodies(b2, topic)

    asyncio.run(main())


def test_a_paced_producers_beats_rest_when_its_last_call_is_answered(brokers, topic):
    """The answer to the last call in flight is the loop's beat and the beats rest from
    there: no timer left to wake the loop 5 ms on with nothing to judge."""
    async def main():
        fuse = Fuse(list(brokers.addrs))
        async with AsyncProducer(brokers.addrs, fuse=fuse) as producer:
            figures = []
            for i in range(3):
                result = await producer.send(topic, b"paced %d" % i)
                client = fuse.snapshot().client
                figures.append((result.status, producer._heartbeat, fuse.calls_in_flight,
                                fuse._late.active, client.late_now_s))
            return figures, client.beats

    # answered: no beat armed, the client at rest (no gap open), its figures kept
    figures, beats = asyncio.run(main())
    assert figures == [("SEND_OK", None, 0, False, 0.0)] * 3
    assert beats >= 6  # each send: a beat as it starts, its last as it is answered
