"""SEND_MULTI on a broker in-process: each message stored with its own tags, keys and
properties at consecutive offsets, its id in the answer, one latency sample for the
request; what a multi may not carry is refused whole, nothing stored."""

import asyncio

from broker_core import protocol as p
from broker_core.client.pulls import read_pull_answer
from broker_core.message_id import encode_id
from broker_core.protocol import Code, Op
from broker_core.protocol.multi import decode_multi_answer, encode_message, encode_multi
from broker_core.trace.records import PROP_TRACE


def call(broker, op, body):
    header = p.Header(op=op, flags=0, code=0, request_id=1, length=len(body))
    return asyncio.run(broker.handle(header, body))


def multi(broker, msgs, topic="orders", qid=1):
    return call(broker, Op.SEND_MULTI, encode_multi(topic, qid, [encode_message(m)
                                                                 for m in msgs]))


def test_each_message_is_stored_as_sent_with_its_own_id(broker):
    msgs = [p.OutMessage(b"a", "paid", "order-1", {"PGROUP": "shop"}),
            p.OutMessage(b"bb", "", "order-2", {"PGROUP": "shop", "X": "y"}),
            p.OutMessage(b"ccc", "refund", "", {"PGROUP": "shop"})]
    code, answer = multi(broker, msgs)
    assert code == Code.OK
    qid, first, _ms, host, offsets, _service = decode_multi_answer(answer)
    assert (qid, first, len(offsets)) == (1, 0, 3)
    code, body = call(broker, Op.PULL, p.encode_pull(p.PullRequest("g", "orders", [(1, 0)])))
    ((_state, got, _corrupt),) = read_pull_answer(body)
    assert [(m.body, m.tags or "", m.keys or "", m.queue_offset) for m in got] == [
        (b"a", "paid", "order-1", 0), (b"bb", "", "order-2", 1), (b"ccc", "refund", "", 2)]
    assert got[1].properties["X"] == "y"
    assert [encode_id(host, off) for off in offsets] == [m.msg_id for m in got]
    for key, body in (("order-1", b"a"), ("order-2", b"bb")):  # each under its own keys
        assert [m.body for m in broker.store.query_by_key(key, "orders").messages] == [body]
    broker.clock.t += 1
    (second,) = broker.close_seconds()
    send = second.ops["send"]
    assert (send.hist.count, send.msgs) == (1, 3)  # one request, three messages


def test_what_a_multi_may_not_carry_refuses_it_whole(broker):
    delayed = [p.OutMessage(b"now"), p.OutMessage(b"later", properties={"DELAY": "1"})]
    code, text = multi(broker, delayed)
    assert code == Code.BAD_REQUEST and b"one by one" in text
    mixed = [p.OutMessage(b"x", properties={"PGROUP": "a"}),
             p.OutMessage(b"y", properties={"PGROUP": "b"})]
    code, text = multi(broker, mixed)
    assert code == Code.BAD_REQUEST and b"producer group" in text
    huge = [p.OutMessage(b"ok"), p.OutMessage(b"x" * (broker.store.config.max_message_bytes
                                                      + 1))]
    assert multi(broker, huge)[0] == Code.MESSAGE_TOO_LARGE
    assert broker.store.queue_offsets("orders", 1) == (0, 0)  # nothing of them stored
    assert multi(broker, [p.OutMessage(b"fine")])[0] == Code.OK  # and the broker serves


def test_traced_messages_of_a_multi_are_counted_by_the_store_tracer(broker):
    msgs = [p.OutMessage(b"t1", properties={PROP_TRACE: "1"}), p.OutMessage(b"plain"),
            p.OutMessage(b"t2", properties={PROP_TRACE: "1"})]
    assert multi(broker, msgs)[0] == Code.OK
    assert broker.trace_store.flush() == 2
