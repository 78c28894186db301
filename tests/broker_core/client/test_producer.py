"""The threaded producer against real brokers in this process (store and TCP server on
an event loop of their own): what a send stores and the result that finds it again, a
batch in one queue, the brokers taken in turn, a failed attempt retried on another
broker (one refusing connections, one that never answers, one answering errors), the
fuse keeping a failing broker out on the producer's clock, refusals failing at once
with the broker's reason, an ordered send kept on its own broker, the one-off calls,
and FLOW_CONTROL waited out on the producer's clock until close fails what still waits."""

from __future__ import annotations

import pytest

from broker_core.client.admin import view_by_id
from broker_core.client.attempts import MAX_BACKOFF_S, SendFailed
from broker_core.client.connection import BrokerUnavailable
from broker_core.client.producer import Producer
from broker_core.protocol import PRODUCER_GROUP, Code, Op, OutMessage, decode_json, encode_json
from broker_core.protocol.delay import LABELS, PROP_DELAY, PROP_REAL_TOPIC, SCHEDULE_TOPIC
from broker_core.server import topic_admin
from broker_core.server.faults import FaultSpec
from broker_core.server.flow_control import Quota
from fuse import Fuse
from tests.broker_core.client.live_brokers import MAX_BYTES, bodies, stored
from tests.clock import ManualClock
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(60)

ISOLATION_OVER_S = 70.0  # past a fuse isolation (60 s, up to 10 % longer)


def test_a_send_is_stored_as_sent_and_its_id_finds_it_again(brokers, topic):
    with Producer(brokers.addrs, fuse=False, group="billing") as producer:
        r = producer.send(topic, b"paid 42", tags="paid", keys="order-42",
                          properties={"region": "eu"})
    assert (r.status, r.attempts, r.retries, r.count) == ("SEND_OK", 1, (), 1)
    assert r.broker in brokers.addrs and 0 <= r.queue_id < 4 and r.queue_offset == 0
    assert r.broker_s is not None and r.store_ms > 0
    doc, why = view_by_id(brokers.addr(r.broker), r.msg_id)
    assert doc is not None, why
    assert (doc["topic"], doc["queue_id"], doc["queue_offset"]) == (topic, r.queue_id, 0)
    assert (doc["body"], doc["tags"], doc["keys"]) == ("paid 42", "paid", "order-42")
    assert doc["properties"]["region"] == "eu"
    assert doc["properties"][PRODUCER_GROUP] == "billing"  # what the brokers' quotas see


def test_sends_take_the_brokers_in_turn_and_each_broker_its_queues(brokers, topic):
    with Producer(brokers.addrs, clock=ManualClock()) as producer:  # the fuse's round robin
        results = [producer.send(topic, b"m%d" % i) for i in range(8)]
    evens, odds = {r.broker for r in results[0::2]}, {r.broker for r in results[1::2]}
    assert len(evens) == len(odds) == 1 and evens | odds == {"b1", "b2"}
    for name in ("b1", "b2"):  # the producer leaves the queue to the broker: each in turn
        assert [r.queue_id for r in results if r.broker == name] == [0, 1, 2, 3]
    assert {r.queue_offset for r in results} == {0}


def test_a_batch_is_stored_in_one_queue_in_order(brokers, topic):
    with Producer(brokers.addrs, fuse=False) as producer:
        first = producer.send_batch(topic, [OutMessage(b, tags="t") for b in (b"a", b"b", b"c")])
        second = producer.send_batch_async(topic, [b"d", b"e"]).result(10)
        with pytest.raises(SendFailed) as mixed:  # refused whole, at once, saying why
            producer.send_batch(topic, [b"f", OutMessage(b"g", tags="t")])
    assert mixed.value.code == Code.BAD_REQUEST and mixed.value.retries == ()
    assert "a batch's messages must share tags, keys and properties" in str(mixed.value)
    assert (first.status, first.count, first.msg_id) == ("SEND_OK", 3, None)
    assert (second.status, second.count) == ("SEND_OK", 2)
    assert second.broker != first.broker  # the next broker in turn
    held = stored(brokers.addr(first.broker), topic)[first.queue_id]
    assert held[first.queue_offset:first.queue_offset + 3] == [b"a", b"b", b"c"]
    assert stored(brokers.addr(second.broker), topic)[second.queue_id] == [b"d", b"e"]


def test_a_broker_refusing_connections_is_passed_over_for_the_next(brokers, topic, down):
    names = {"down": down, "b1": brokers.addr("b1")}
    with Producer(names, fuse=False, retries=1) as producer:
        results = [producer.send(topic, b"s%d" % i) for i in range(3)]
        futures = [producer.send_async(topic, b"a%d" % i) for i in range(3)]
        results += [f.result(10) for f in futures]
        results.append(producer.send_batch(topic, [b"x", b"y"]))
    assert {(r.status, r.broker) for r in results} == {("SEND_OK", "b1")}
    retried = [r for r in results if r.attempts == 2]
    assert retried, "the down broker was never tried"
    for r in retried:
        (why,) = r.retries
        assert why.startswith(f"down: {down}: ") and "refused" in why.lower()

    with Producer(names, fuse=False, retries=0) as producer:
        with pytest.raises(SendFailed) as err:  # its turn is the down broker's: no retry
            producer.send(topic, b"lost")
        assert producer.send(topic, b"kept").broker == "b1"  # the next turn
    assert err.value.code is None  # no broker answered
    assert str(err.value).startswith("send failed after 1 attempt(s); last from down: ")
    assert len(err.value.retries) == 1 and err.value.retries[0].startswith("down: ")
    assert b"lost" not in bodies(brokers.addr("b1"), topic)


def test_a_broker_that_never_answers_is_given_up_after_the_timeout(brokers, topic, silent):
    names = {"silent": silent, "b1": brokers.addr("b1")}
    # at least once: the next broker, though the first may have stored it
    with Producer(names, fuse=False, retries=1, timeout=0.3, idempotent=False) as producer:
        r = producer.send(topic, b"blocking")
    assert (r.broker, r.attempts) == ("b1", 2)
    assert r.retries == (f"silent: {silent}: no answer in 0.3 s",)

    clock = ManualClock()  # send_async's timeouts run on the producer's clock
    with Producer(names, fuse=False, retries=1, timeout=30.0, clock=clock,
                  idempotent=False) as producer:
        fut = producer.send_async(topic, b"async")
        clock.advance(30.0)
        r = fut.result(10)  # 30 s of the producer's clock, not of the wall's
    assert (r.broker, r.attempts) == ("b1", 2)
    assert r.retries == (f"silent: {silent}: no answer in 30 s",)
    assert bodies(brokers.addr("b1"), topic) == [b"async", b"blocking"]


def test_a_send_whose_answer_was_lost_is_stored_once_and_answered_as_its_first_try(
        brokers, topic):
    # each write held 0.5 s for 0.6 s: the first try is stored after the producer gave up
    # on it (0.3 s), and its retries, to the same broker, find it there
    brokers.call(brokers["b2"].faults.inject, FaultSpec(latency_ms=500, duration_s=0.6))
    with Producer({"b2": brokers.addr("b2"), "b1": brokers.addr("b1")}, fuse=False,
                  retries=6, timeout=0.3) as producer:
        r = producer.send(topic, b"once")
    assert r.broker == "b2" and r.attempts >= 2 and r.status == "SEND_OK"
    assert all(w.startswith("b2: ") for w in r.retries)
    assert bodies(brokers.addr("b2"), topic) == [b"once"]
    assert bodies(brokers.addr("b1"), topic) == []
    doc, why = view_by_id(brokers.addr("b2"), r.msg_id)
    assert doc is not None, why
    assert (doc["body"], doc["queue_id"], doc["queue_offset"]) == ("once", r.queue_id,
                                                                    r.queue_offset)
    figures = brokers["b2"].sends.idempotent.seqs.figures()
    assert figures["duplicates"] >= 1 and figures["producers"] >= 1


def test_a_broker_answering_errors_is_retried_elsewhere_and_kept_out_by_the_fuse(
        brokers, topic):
    brokers.call(brokers["b2"].faults.inject, FaultSpec(error_rate=1.0))
    clock = ManualClock()
    fuse = Fuse(["b1", "b2"], max_isolated_ratio=0.5, clock=clock)  # may isolate 1 of 2
    try:
        with Producer(brokers.addrs, fuse=fuse, clock=clock) as producer:
            results = [producer.send(topic, b"m%d" % i) for i in range(6)]
            assert {r.broker for r in results} == {"b1"}
            assert [r.attempts for r in results].count(2) == 1  # b2 once, then kept out
            (retried,) = [r for r in results if r.attempts == 2]
            assert retried.retries == ("b2: SYSTEM_ERROR: injected error",)
            assert producer.fuse.excluded == {"b2"}
            clock.advance(ISOLATION_OVER_S)  # its isolation is over: tried again
            again = [producer.send(topic, b"n%d" % i) for i in range(4)]
            assert {r.broker for r in again} == {"b1"}
            assert [r.attempts for r in again].count(2) == 1
    finally:
        brokers.call(brokers["b2"].faults.clear)
    assert not any(stored(brokers.addr("b2"), topic).values())  # refused before storing


def test_refusals_fail_at_once_with_the_brokers_reason(brokers, topic):
    with Producer(brokers.addrs, clock=ManualClock()) as producer:
        with pytest.raises(SendFailed) as big:
            producer.send(topic, b"x" * (MAX_BYTES + 1))
        with pytest.raises(SendFailed) as bad_name:
            producer.send("no spaces here", b"x")
        with pytest.raises(SendFailed) as own:
            producer.send(SCHEDULE_TOPIC, b"x")
        snap = producer.fuse.snapshot()
    assert big.value.code == Code.MESSAGE_TOO_LARGE
    assert f"over the {MAX_BYTES}-byte limit" in str(big.value)
    assert big.value.retries == ()  # the caller's error: not tried on another broker
    assert bad_name.value.code == Code.BAD_REQUEST
    assert "illegal topic name 'no spaces here'" in str(bad_name.value)
    assert own.value.code == Code.NO_PERMISSION  # every broker asked, none takes it
    assert str(own.value).startswith("no broker takes this send")
    assert sorted(w.split(":")[0] for w in own.value.retries) == ["b1", "b2"]
    assert not snap.isolations_by_broker  # no broker held to account for them


def test_a_topic_read_only_on_one_broker_goes_to_the_other_without_spending_a_retry(
        brokers, topic):
    brokers.call(topic_admin.put, brokers["b1"], {"topic": topic, "perm": "r"})
    with Producer(brokers.addrs, retries=0, clock=ManualClock()) as producer:
        results = [producer.send(topic, b"m%d" % i) for i in range(4)]
        brokers.call(topic_admin.put, brokers["b2"], {"topic": topic, "perm": "r"})
        with pytest.raises(SendFailed) as err:
            producer.send(topic, b"nowhere")
        snap = producer.fuse.snapshot()
    assert {r.broker for r in results} == {"b2"}
    moved = [r for r in results if r.attempts == 2]
    assert moved, "b1 was never asked"
    assert moved[0].retries == (
        f"b1: NO_PERMISSION: topic {topic!r} is not writable on b1 (permission r)",)
    assert err.value.code == Code.NO_PERMISSION
    assert str(err.value).startswith("no broker takes this send")
    assert not snap.isolations_by_broker  # a broker well, taking no writes for the topic


def test_an_ordered_send_keeps_its_queue_and_is_retried_on_its_own_broker_only(
        brokers, topic, b3):
    names = {"b1": brokers.addr("b1"), "b3": b3}
    with Producer(names, fuse=False, retries=2) as producer:
        keys = [f"k{i}" for i in range(8)]
        placed = {k: producer.send(topic, f"{k}:0".encode(), order_key=k) for k in keys}
        again = {k: producer.send(topic, f"{k}:1".encode(), order_key=k) for k in keys}
        assert all((again[k].broker, again[k].queue_id) == (placed[k].broker, placed[k].queue_id)
                   for k in keys)
        key = next(k for k in keys if placed[k].broker == "b3")
        queue = stored(b3, topic)[placed[key].queue_id]
        assert [b for b in queue if b.startswith(f"{key}:".encode())] == \
            [f"{key}:0".encode(), f"{key}:1".encode()]
        brokers.stop("b3")
        with pytest.raises(SendFailed) as err:
            producer.send(topic, f"{key}:2".encode(), order_key=key)
    assert len(err.value.retries) == 3  # 1 + retries, every one on b3
    assert all(why.startswith("b3: ") for why in err.value.retries)
    assert f"{key}:2".encode() not in bodies(brokers.addr("b1"), topic)
    with Producer(names, fuse=False) as fresh:  # b3's queues cannot be learned: no guess
        with pytest.raises(SendFailed, match="ORDER_QUEUE_UNAVAILABLE: cannot learn the "
                                             f"queues of {topic!r}.*b3: "):
            fresh.send(topic, b"x", order_key=key)


def test_one_off_calls_go_to_one_broker_and_are_never_retried(brokers, topic, down):
    names = {"down": down, "b1": brokers.addr("b1")}
    with Producer(names, fuse=False) as producer:
        assert producer.names == ["down", "b1"]
        code, body = producer.request("b1", Op.ROUTE, encode_json({"topic": topic,
                                                                   "create": True}))
        assert code == Code.OK and decode_json(body)["queues"] == 4
        with pytest.raises(BrokerUnavailable, match=down):
            producer.request("down", Op.ROUTE, encode_json({"topic": topic}))
        for i in range(2):  # one of them to the down broker: dropped, not raised
            producer.send_oneway(topic, b"oneway-%d" % i)
        wait_for(lambda: bodies(brokers.addr("b1"), topic), 10, "the one-way send on b1")
    assert len(bodies(brokers.addr("b1"), topic)) == 1  # the other was not sent again


def test_a_delay_goes_as_its_level_and_one_not_offered_is_refused_before_sending(
        brokers, topic):
    addr = brokers.addr("b1")
    with Producer({"b1": addr}, fuse=False) as producer:
        with pytest.raises(ValueError, match="a delay must be one of RocketMQ's levels"):
            producer.send(topic, b"x", delay="7s")
        r = producer.send(topic, b"later", delay="5s")
    doc, why = view_by_id(addr, r.msg_id)
    assert doc is not None, why
    assert doc["topic"] == SCHEDULE_TOPIC  # kept aside by the broker until it is due
    assert doc["properties"][PROP_DELAY] == str(LABELS.index("5s") + 1)
    assert doc["properties"][PROP_REAL_TOPIC] == topic
    assert bodies(addr, topic) == []


def test_flow_control_is_waited_out_on_the_producers_clock_and_close_fails_what_waits(
        brokers, topic):
    b1, addr = brokers["b1"], brokers.addr("b1")
    quota = Quota.make("topic", topic, rate=0.001, burst=1)  # one now, the next in 1000 s
    brokers.call(b1.flow.set, quota)
    clock = ManualClock()
    producer = Producer({"b1": addr}, fuse=False, clock=clock)
    try:
        assert producer.send_async(topic, b"first").result(10).status == "SEND_OK"
        waiting = producer.send_async(topic, b"second")
        wait_for(lambda: producer.counters.snapshot()["flow_control"] == 1, 10, "throttled")
        brokers.call(b1.flow.clear, "topic", topic)
        assert not waiting.done()  # backing off: the producer's clock has not moved
        clock.advance(MAX_BACKOFF_S)  # the longest a broker's hint is waited
        r = waiting.result(10)
        assert (r.status, r.attempts) == ("SEND_OK", 2)
        figures = producer.counters.snapshot()
        assert figures["backoff_s"] == MAX_BACKOFF_S and figures["flow_control_gave_up"] == 0

        brokers.call(b1.flow.set, quota)  # a full bucket again: one passes, one waits
        assert producer.send_async(topic, b"third").result(10).status == "SEND_OK"
        stuck = producer.send_async(topic, b"fourth")
        wait_for(lambda: producer.counters.snapshot()["flow_control"] == 2, 10, "throttled")
        producer.close()
        with pytest.raises(SendFailed, match="producer closed while backing off") as err:
            stuck.result(10)
        assert err.value.code == Code.FLOW_CONTROL
    finally:
        producer.close()
        brokers.call(b1.flow.clear, "topic", topic)
    assert bodies(addr, topic) == [b"first", b"second", b"third"]  # never sent again
