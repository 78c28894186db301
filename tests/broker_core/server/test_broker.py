"""The broker's dispatch in-process (no TCP): each op's answer, bad requests
counted and answered, the direct send path and the async one agreeing."""

import asyncio

import pytest

from broker_core import protocol as p
from broker_core.client.pulls import read_pull_answer
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
    queue_id, queue_offset = p.decode_send_response(answer)[0:2]
    assert (queue_id, queue_offset) == (0, 0)
    code, body = call(broker, Op.PULL, p.encode_pull(p.PullRequest("g", "orders", [(0, 0)])))
    ((state, messages, _corrupt),) = read_pull_answer(body)
    assert code == Code.OK and [m.body for m in messages] == [b"hello"]
    assert messages[0].keys == "k1"


def test_unknown_op_and_garbage_are_bad_requests_that_are_counted(broker):
    assert call(broker, 99)[0] == Code.BAD_REQUEST
    code, text = call(broker, Op.SEND, b"\x00\x01garbage")
    assert code == Code.BAD_REQUEST and text
    assert broker.counters["bad_requests"] == 2
    assert send(broker)[0] == Code.OK  # and the broker keeps serving


@pytest.mark.parametrize("group", ["a b", "", "x" * 121, "../etc", "svc.billing"])
def test_a_group_name_no_retry_topic_could_carry_is_refused_and_nothing_kept(broker, group):
    """Its retries would go to %RETRY%<group>, which no broker takes: refused at the first
    commit or heartbeat, not at the first nack, when its messages are already consumed."""
    commit = p.encode_json({"group": group, "topic": "orders", "queue_id": 0, "offset": 1})
    beat = p.encode_json({"group": group, "topic": "orders", "client_id": "c1"})
    lock = p.encode_json({"group": group, "topic": "orders", "client_id": "c1", "queues": [0]})
    for op, body in ((Op.COMMIT_OFFSET, commit), (Op.HEARTBEAT, beat), (Op.LOCK_BATCH, lock)):
        code, text = call(broker, op, body)
        assert code == Code.BAD_REQUEST and b"illegal consumer group name" in text
    assert broker.offsets.offsets == {} and broker.members.groups() == []
    ok = p.encode_json({"group": "g-1_a|b%c", "topic": "orders", "queue_id": 0, "offset": 1})
    assert call(broker, Op.COMMIT_OFFSET, ok)[0] == Code.OK  # and the broker keeps serving
    assert broker.offsets.get("g-1_a|b%c", "orders", 0) == 1


def test_queue_out_of_range_is_refused_not_stored(broker):
    code, text = send(broker, queue=99)
    assert code == Code.BAD_REQUEST and b"out of range" in text
    assert broker.store.queues() == []  # nothing was written to any queue
    assert send(broker, queue=0)[0] == Code.OK and broker.store.queues() == [("orders", 0)]


def test_a_send_is_answered_at_once_unless_something_must_wait(broker):
    body = p.encode_send("orders", 0, p.OutMessage(b"x"))

    async def run():
        replies = []
        now = broker.sends.send(5, body, 0.0, replies.append)  # async flush, no fault
        assert p.decode_header(now).code == Code.OK and not replies
        broker.faults.inject(FaultSpec(latency_ms=1))  # a fault's delay: answered later
        assert broker.sends.send(6, body, 0.0, replies.append) is None
        while not replies:
            await asyncio.sleep(0.001)
        header = p.decode_header(replies[0])
        assert (header.request_id, header.code) == (6, Code.OK)
        assert broker.write_path.inflight == 0

    asyncio.run(run())
    assert broker.store.queue_offsets("orders", 0) == (0, 2)


def test_injected_errors_are_the_brokers_failures_and_refused_input_is_not(broker):
    """What tells FAILING from a client's bad input: every error is counted by its code,
    and only the broker's own (SYSTEM_ERROR here) are failures, the latest kept with its
    text; an oversize message or an unknown topic is an error, not a failure."""
    broker.topics.auto_create = False
    limit = broker.store.config.max_message_bytes
    assert send(broker, body=b"x" * (limit + 1))[0] == Code.MESSAGE_TOO_LARGE
    assert send(broker, topic="nope")[0] == Code.TOPIC_NOT_EXIST
    broker.topics.put("orders", 4)
    broker.faults.inject(FaultSpec(error_rate=1.0))
    assert send(broker)[0] == Code.SYSTEM_ERROR
    broker.clock.t += 1
    broker.tick()
    second = broker.recorder.history[-1].ops["send"]
    assert (second.errors, second.failures, second.msgs) == (3, 1, 0)  # none counted in
    doc = broker.stats()
    assert doc["ops"]["send"]["10s"]["errors"] == 3
    assert doc["ops"]["send"]["10s"]["failures"] == 1
    assert doc["send_error_codes"] == {"MESSAGE_TOO_LARGE": 1, "TOPIC_NOT_EXIST": 1,
                                       "SYSTEM_ERROR": 1}
    assert doc["last_send_failure"] == {"code": "SYSTEM_ERROR", "text": "injected error",
                                        "time": broker.clock.t - 1}
    assert doc["last_send_refusal"]["code"] == "TOPIC_NOT_EXIST"
    assert "nope" in doc["last_send_refusal"]["text"]
    assert doc["totals"]["send_errors"] == 3


def test_tick_takes_the_snapshot_every_exporter_reads(broker):
    send(broker)
    broker.clock.t += 1
    closed = broker.tick()
    assert [s.ops["send"].msgs for s in closed] == [1]
    snap = broker.snapshot()
    assert snap is broker.latest and snap.name == "b1"
    doc = broker.stats(history_s=5)
    assert doc["broker"] == "b1" and len(doc["history"]["send"]) == 1


def test_the_stats_json_is_the_stats_document_with_each_second_encoded_once(broker):
    """/stats with 300 s of history encoded ~1,200 histograms a request on the loop that
    serves sends (7-10 ms a broker: `floodgate status` put make demo's masters over 20 ms)."""
    import json

    for _ in range(4):
        send(broker)
        broker.clock.t += 1
        broker.tick()
    for history in (0, 2, 300):
        assert json.loads(broker.stats_json(history)) == broker.stats(history)
    cached = dict(broker._stats_json._seconds)
    assert len(cached) == 4 * len(broker.snapshot().windows)  # each op's closed seconds
    assert json.loads(broker.stats_json(300)) == broker.stats(300)  # from the kept text
    broker.clock.t += 400  # every second before has left the history: its text goes too
    broker.tick()
    broker.stats_json(300)
    assert not set(cached) & set(broker._stats_json._seconds)


def test_a_second_closed_at_its_boundary_holds_only_its_own_sends(broker):
    """The tick's halves: the seconds close at the boundary; the snapshot comes later in
    the second (runner.tick_phase), and a send between the two belongs to the new second."""
    send(broker)
    broker.clock.t += 1
    closed = broker.close_seconds()
    send(broker)  # after the boundary, before the heavy half
    broker.refresh()
    assert [s.ops["send"].msgs for s in closed] == [1]
    assert broker.snapshot().windows["send"]["1s"].msgs_per_s == 1
    broker.clock.t += 1
    assert [s.ops["send"].msgs for s in broker.close_seconds()] == [1]


def test_brokers_a_launcher_starts_on_one_host_tick_apart():
    from itertools import pairwise

    from broker_core.server.housekeeping import TICK_SPREAD_S, tick_phase

    for stride, count in ((1, 11), (2, 11), (3, 8)):
        phases = sorted(tick_phase(20900 + stride * i) for i in range(count))
        assert TICK_SPREAD_S[0] <= phases[0] and phases[-1] < TICK_SPREAD_S[1]
        assert min(b - a for a, b in pairwise(phases)) > 0.07, (stride, phases)


def test_a_broker_stopped_before_its_tick_phase_still_logs_the_seconds_it_closed(broker, tmp_path):
    """Stopped between the boundary (seconds closed) and its phase (the snapshot): the
    closed second's rows reach the metrics log all the same (shutdown then closes only
    the seconds after it)."""
    import time

    from broker_core.observe.metrics_log import MetricsLogWriter
    from broker_core.server.housekeeping import Housekeeping, tick_phase

    assert tick_phase(broker.config.port) > 0.5  # the default port: late in the second
    writer = MetricsLogWriter(tmp_path / "metrics", "c", "b1")
    send(broker)
    broker.clock.t += 1  # the send's second has ended on the broker's clock

    async def stopped_mid_tick() -> None:
        housekeeping = Housekeeping(broker, writer)
        housekeeping.wake()
        task = housekeeping._task
        await asyncio.sleep(1.0 - time.time() % 1.0 + 0.3)  # past a boundary, before the phase
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(stopped_mid_tick())
    latency, stats, _ = writer.take()
    assert [(r["op"], r["msgs"]) for r in latency] == [("send", 1)] and len(stats) == 1


def test_a_topic_made_just_before_a_crash_comes_back_from_the_store(tmp_path):
    """The topic table is saved by the tick, off the loop: a broker killed before that
    must still serve the topic's stored messages to a new group after it restarts."""
    from broker_core.server.broker import Broker, BrokerConfig

    first = Broker(BrokerConfig("b1", tmp_path / "b1", segment_bytes=8 << 20))
    assert send(first, b"kept", queue=2, topic="made-now")[0] == Code.OK
    first.store.close()  # the store is flushed; the topic table never saved
    assert not (tmp_path / "b1" / "topics.json").exists()
    again = Broker(BrokerConfig("b1", tmp_path / "b1", segment_bytes=8 << 20))
    try:
        assert again.topics.get("made-now", create=False) == 4  # as auto-creation made it
        code, body = call(again, Op.PULL, p.encode_pull(p.PullRequest("new", "made-now", [(2, 0)])))
        ((_state, messages, _c),) = read_pull_answer(body)
        assert code == Code.OK and [m.body for m in messages] == [b"kept"]
    finally:
        again.close()


def test_sends_without_a_queue_take_each_topics_queues_in_turn(broker):
    """Per topic: a client cycling through 4-queue topics must not pin each topic to
    one queue (a counter shared by all topics did exactly that)."""
    taken = {t: [] for t in ("a", "b", "c", "d")}
    for _ in range(4):
        for topic in taken:
            code, answer = send(broker, queue=-1, topic=topic)
            taken[topic].append(p.decode_send_response(answer)[0])
    assert all(sorted(q) == [0, 1, 2, 3] for q in taken.values()), taken


def test_a_drill_fault_ends_on_the_brokers_own_clock(tmp_path):
    """Intervals run on the broker's injected monotonic clock (issue 25: code that takes a
    clock must use it): a 30 s fault ends when that clock says so, with no sleep."""
    from broker_core.server.broker import Broker, BrokerConfig
    from tests.clock import ManualClock

    mono = ManualClock(1000.0)
    b = Broker(BrokerConfig("b1", tmp_path / "b1", segment_bytes=8 << 20), monotonic=mono)
    try:
        b.faults.inject(FaultSpec(error_rate=1.0, duration_s=30.0))
        assert b.faults.active
        mono.advance(29.9)
        assert b.faults.active and b.faults.describe()["remaining_s"] == pytest.approx(0.1)
        mono.advance(0.2)
        assert not b.faults.active
        assert send(b)[0] == Code.OK  # serving normally again
    finally:
        b.close()


def test_a_group_broker_writes_nothing_before_its_replication_is_attached(tmp_path):
    """Its data port opens before its HA node attaches: a send then would be stored on one
    copy, answered as if replicated, and cut when the broker turns out to be the slave
    (a master killed and restarted fast, producers still routed to it)."""
    from broker_core.server.broker import Broker
    from broker_core.server.config import BrokerConfig
    from tests.clock import ManualClock

    b = Broker(BrokerConfig("group-1-a", tmp_path / "a", segment_bytes=8 << 20,
                            group="group-1"), clock=ManualClock(1_794_355_200.0))
    try:
        code, text = send(b)
        assert code == Code.NOT_MASTER
        assert text == b"group-1-a is starting: its role in group group-1 is not known yet"
        assert b.store.queues() == []  # nothing stored
        lock = p.encode_json({"group": "g", "client_id": "c", "topic": "orders",
                              "queues": [0]})
        assert call(b, Op.LOCK_BATCH, lock)[0] == Code.NOT_MASTER
        assert not b.delivers_delayed()
    finally:
        b.close()
