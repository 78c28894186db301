"""The broker's dispatch in-process (no TCP): each op's answer, bad requests
counted and answered, the direct send path and the async one agreeing."""

import asyncio

from broker_core import protocol as p
from broker_core.protocol import Code, Op
from broker_core.server.faults import FaultSpec


def call(broker, op, body=b""):
    header = p.Header(op=op, flags=0, code=0, request_id=1, length=len(body))
    return asyncio.run(broker.handle(header, body))


def send(broker, body=b"hello", queue=0, topic="orders"):
    return call(broker, Op.SEND, p.encode_send(topic, queue, p.OutMessage(body, keys="k1")))


def test_send_then_pull_returns_the_message(broker):
    code, answer = send(broker)
    assert code == Code.OK
    queue_id, queue_offset = p.decode_send_response(answer)[1:3]
    assert (queue_id, queue_offset) == (0, 0)
    code, body = call(broker, Op.PULL, p.encode_pull(p.PullRequest("g", "orders", 0, 0)))
    status, *_, messages = p.decode_pull_response(body, "orders", 0)
    assert code == Code.OK and [m.body for m in messages] == [b"hello"]
    assert messages[0].keys == "k1"


def test_unknown_op_and_garbage_are_bad_requests_that_are_counted(broker):
    assert call(broker, 99)[0] == Code.BAD_REQUEST
    code, text = call(broker, Op.SEND, b"\x00\x01garbage")
    assert code == Code.BAD_REQUEST and text
    assert broker.counters["bad_requests"] == 2
    assert send(broker)[0] == Code.OK  # and the broker keeps serving


def test_queue_out_of_range_is_refused_not_stored(broker):
    code, text = send(broker, queue=99)
    assert code == Code.BAD_REQUEST and b"out of range" in text
    assert broker.store.queues() == []  # nothing was written to any queue
    assert send(broker, queue=0)[0] == Code.OK and broker.store.queues() == [("orders", 0)]


def test_direct_path_is_taken_only_when_nothing_waits(broker):
    body = p.encode_send("orders", 0, p.OutMessage(b"x"))
    assert broker.send_now(body)[0] == Code.OK  # async flush, no fault, idle
    broker.faults.inject(FaultSpec(latency_ms=1))
    assert broker.send_now(body) is None  # a fault: the async path must run it
    assert send(broker)[0] == Code.OK


def test_injected_errors_answer_system_error_and_count_as_errors(broker):
    broker.faults.inject(FaultSpec(error_rate=1.0))
    assert send(broker)[0] == Code.SYSTEM_ERROR
    broker.clock.t += 1
    broker.tick()
    assert broker.recorder.history[-1].ops["send"].errors == 1
    assert broker.recorder.history[-1].ops["send"].msgs == 0  # refused: not counted in


def test_tick_takes_the_snapshot_every_exporter_reads(broker):
    send(broker)
    broker.clock.t += 1
    closed = broker.tick()
    assert [s.ops["send"].msgs for s in closed] == [1]
    snap = broker.snapshot()
    assert snap is broker.latest and snap.name == "b1"
    doc = broker.stats(history_s=5)
    assert doc["broker"] == "b1" and len(doc["history"]["send"]) == 1
