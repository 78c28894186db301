"""QUERY_BY_KEY, VIEW_BY_ID, QUERY_BY_TIME in-process: answers, the id a send answer
carries, what the broker writes to the trace about a traced send, and one clear line
for bad input."""

import asyncio

from broker_core import protocol as p
from broker_core.client.pulls import read_pull_answer
from broker_core.message_id import decode_id, encode_id
from broker_core.protocol import Code, Op
from broker_core.trace.records import PROP_TRACE, TRACE_TOPIC, decode_batch, stored_key, trace_key


def call(broker, op, body=b""):
    header = p.Header(op=op, flags=0, code=0, request_id=1, length=len(body))
    return asyncio.run(broker.handle(header, body))


def send(broker, key, traced=False):
    props = {PROP_TRACE: "1"} if traced else {}
    code, answer = call(broker, Op.SEND, p.encode_send(
        "orders", -1, p.OutMessage(f"body of {key}".encode(), keys=key, properties=props)))
    assert code == Code.OK
    qid, qoff, phys, _ts, _svc, host = p.decode_send_answer(answer)
    return encode_id(host, phys), qid, qoff


def test_lookups_answer_documents_and_the_send_answer_names_the_id(broker):
    ids = [send(broker, f"order-{i}")[0] for i in range(5)]
    assert decode_id(ids[0])[0] == broker.config.addr
    code, body = call(broker, Op.QUERY_BY_KEY, p.encode_json({"key": "order-3"}))
    doc = p.decode_json(body)
    assert code == Code.OK and [m["id"] for m in doc["messages"]] == [ids[3]]
    m = doc["messages"][0]
    assert (m["body"], m["keys"], m["broker"]) == ("body of order-3", "order-3", "b1")
    code, body = call(broker, Op.VIEW_BY_ID, p.encode_json({"id": ids[1]}))
    assert code == Code.OK and p.decode_json(body)["message"]["keys"] == "order-1"
    code, body = call(broker, Op.QUERY_BY_TIME, p.encode_json({"topic": "orders", "limit": 3}))
    doc = p.decode_json(body)
    assert len(doc["messages"]) == 3 and doc["more"]


def test_traced_sends_answered_ok_are_summed_up_once_a_second(broker):
    sent = [send(broker, f"order-{i}", traced=True) for i in range(3)]
    send(broker, "order-8")  # not traced: not counted
    broker.tick()
    first, last = (decode_id(sent[i][0])[1] for i in (0, -1))
    docs = {}
    for msg_id, *_ in sent:  # no record of its own: the message is its own store record
        code, body = call(broker, Op.QUERY_BY_KEY, p.encode_json({"key": trace_key(msg_id),
                                                                  "topic": TRACE_TOPIC}))
        assert p.decode_json(body)["messages"] == []
        code, body = call(broker, Op.VIEW_BY_ID, p.encode_json({"id": msg_id}))
        docs[msg_id] = p.decode_json(body)["message"]
    key = stored_key(broker.config.addr, docs[sent[1][0]]["store_ms"])
    code, body = call(broker, Op.QUERY_BY_KEY, p.encode_json({"key": key,
                                                              "topic": TRACE_TOPIC}))
    [trace] = p.decode_json(body)["messages"]
    [rec] = decode_batch(trace["body"].encode())
    assert rec["type"] == "stored" and rec["code"] == "OK" and rec["count"] == 3
    assert (rec["from_phys"], rec["to_phys"], rec["addr"]) == (first, last, broker.config.addr)
    assert rec["flush"] == "async" and rec["replication"] == "none"
    msg_id, qid, qoff = sent[0]
    pulled = call(broker, Op.PULL, p.encode_pull(p.PullRequest("g", "orders", [(qid, qoff)])))[1]
    first_pulled = read_pull_answer(pulled)[0][1][0]
    assert first_pulled.msg_id == msg_id  # a traced message tells its consumer its id


def test_a_traced_send_answered_otherwise_gets_a_store_record_of_its_own(broker):
    result = broker.store.put("orders", 1, b"late", keys="order-9", wait=False)
    broker.trace_store.add(result, "orders", 1, Code.FLUSH_DISK_TIMEOUT)
    broker.tick()
    msg_id = encode_id(broker.config.addr, result.physical_offset)
    code, body = call(broker, Op.QUERY_BY_KEY, p.encode_json({"key": trace_key(msg_id),
                                                              "topic": TRACE_TOPIC}))
    [trace] = p.decode_json(body)["messages"]
    [rec] = decode_batch(trace["body"].encode())
    assert rec["type"] == "store" and rec["id"] == msg_id
    assert rec["code"] == "FLUSH_DISK_TIMEOUT" and rec["queue_offset"] == result.queue_offset


def test_bad_ids_and_keys_are_one_line_answers(broker):
    msg_id = send(broker, "order-1")[0]
    for op, req, code, text in (
        (Op.VIEW_BY_ID, {"id": "xyz"}, Code.BAD_REQUEST, b"bad message id 'xyz'"),
        (Op.VIEW_BY_ID, {}, Code.BAD_REQUEST, b"bad message id None"),
        (Op.VIEW_BY_ID, {"id": msg_id[:-1] + "5"}, Code.MESSAGE_NOT_FOUND,
         b"no message starts at offset 5"),
        (Op.VIEW_BY_ID, {"id": encode_id("127.0.0.1:1", 10**12)}, Code.MESSAGE_NOT_FOUND,
         b"never written here"),
        (Op.QUERY_BY_KEY, {"key": "a b"}, Code.BAD_REQUEST, b"one non-empty word"),
        (Op.QUERY_BY_KEY, {"key": 5}, Code.BAD_REQUEST, b"needs a string key"),
        (Op.QUERY_BY_KEY, {"key": "k", "limit": 0}, Code.BAD_REQUEST, b"limit must be"),
        (Op.QUERY_BY_TIME, {}, Code.BAD_REQUEST, b"needs a topic"),
    ):
        got, body = call(broker, op, p.encode_json(req))
        assert got == code and text in body and b"\n" not in body, (req, body)
