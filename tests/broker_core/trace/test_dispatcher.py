"""The trace dispatcher batches records into messages keyed by message id, and never
blocks or raises: a full buffer or a failed send drops and counts. On an event loop it
sends from the loop; nothing wakes while nothing waits; the send record's hand-made JSON reads back field for field."""

import asyncio
import base64
import json
import threading
import time

from broker_core.client.attempts import SendResult
from broker_core.client.tracing import SendTracer
from broker_core.cluster.trace_finder import body_of
from broker_core.trace.dispatcher import TraceDispatcher
from broker_core.trace.records import Sampler, decode_batch, encode_batch, trace_key
from tests.waiting import wait_for


def test_batches_keyed_by_ids_and_failed_sends_by_their_keys():
    body, keys = encode_batch([{"type": "send", "id": "A"}, {"type": "store", "id": "A"},
                               {"type": "send", "id": None, "keys": "order-1 user-2"}])
    assert keys == "A order-1 user-2"
    assert [r["type"] for r in decode_batch(body)] == ["send", "store", "send"]
    assert decode_batch(b"not json") == [] and decode_batch(b"[1]") == []


def test_flush_sends_batches_and_a_full_buffer_drops():
    sent = []
    d = TraceDispatcher(lambda body, keys: sent.append(keys), batch=3, max_pending=5)
    d._thread = object()  # no thread: the test flushes by hand
    for i in range(7):
        d.add({"type": "send", "id": f"id{i}"})
    assert d.counters["dropped"] == 2
    assert d.flush() == 5 and sent == ["id0 id1 id2", "id3 id4"]
    assert d.counters["messages"] == 2


def test_a_failed_send_is_counted_not_raised():
    def boom(body, keys):
        raise OSError("broker down")

    d = TraceDispatcher(boom)
    d._thread = object()
    d.add({"type": "send", "id": "x"})
    assert d.flush() == 0 and d.counters["failed"] == 1 and d.counters["dropped"] == 1


def test_sampler_rates():
    assert not Sampler(0.0) and not Sampler(0.0).sample()
    assert all(Sampler(1.0).sample() for _ in range(100))
    tenth = Sampler(0.1, seed=1)
    assert 50 < sum(tenth.sample() for _ in range(1000)) < 150


def test_a_send_record_is_formatted_as_json_its_fields_in_order():
    d = TraceDispatcher(lambda body, keys: None)
    d._thread = object()
    tracer = SendTracer(d, 1.0, "host-1-abc")
    msg_id = "7F0000010000232900000000001ABCDE"
    for keys in ('order-1 user-2', 'quote " and \\ slash', "naïve\n"):
        d._pending.clear()
        tracer.record("orders", None, keys, 10, 1000, 0.00123,
                      SendResult("SEND_OK", "broker-1", 2, 7, attempts=2, broker_s=0.0004,
                                 msg_id=msg_id, retries=("broker-2: busy",)))
        body, index_keys = encode_batch(list(d._pending))
        [rec] = decode_batch(body)
        assert rec == {"type": "send", "id": msg_id, "keys": keys, "client": "host-1-abc",
                       "born_ms": 1000, "rt_ms": 1.23, "status": "SEND_OK",
                       "broker": "broker-1", "attempts": 2, "retries": ["broker-2: busy"],
                       "broker_ms": 0.4, "fuse": None}
        assert index_keys == trace_key(msg_id) == msg_id[:29]


def test_a_version_1_batch_is_still_read():
    body = json.dumps({"v": 1, "records": [
        ["send", "ID1", "orders", "", "k", "c", 5, 1.0, 10, "SEND_OK", "b1", "h:1", 1, [],
         2, 7, 6, 0.1, "usable", None],
        ["store", "ID1", "b1", "h:1", "orders", 2, 7, 6, "OK", "async", "none"]]}).encode()
    send, store = decode_batch(body)
    assert (send["queue_offset"], send["addr"], store["code"]) == (7, "h:1", "OK")


def test_on_an_event_loop_batches_go_out_from_the_loop_and_detach_waits_for_them():
    sent, threads = [], set()

    async def send(body, keys):
        threads.add(threading.get_ident())
        await asyncio.sleep(0.01)
        if b"boom" in body:
            raise OSError("broker down")
        sent.append(keys)

    async def run():
        d = TraceDispatcher(lambda body, keys: None, batch=2, interval_s=0.05)
        d.attach(send)
        for i in range(5):  # two full batches at once; the fifth waits
            d.add({"type": "send", "id": f"id{i}"})
        await asyncio.sleep(0)
        assert len(d._inflight) == 2 and len(d._pending) == 1
        d.add({"type": "send", "id": "boom"})  # a full batch with the fifth: it fails
        await d.detach()
        return d

    d = asyncio.run(run())
    assert sorted(sent) == ["id0 id1", "id2 id3"]
    assert threads == {threading.get_ident()} and d._thread is None  # no thread started
    assert (d.counters["sent"], d.counters["dropped"], d.counters["failed"]) == (4, 2, 1)


def test_on_an_event_loop_a_partial_batch_goes_out_on_the_timer_armed_only_then():
    """No timer is armed while nothing waits (one every interval woke each traced
    client's loop ten times a second, traffic or not)."""
    sent = []

    async def send(body, keys):
        sent.append(keys)

    async def run():
        d = TraceDispatcher(lambda body, keys: None, batch=10, interval_s=0.02)
        d.attach(send)
        armed = [d._timer is not None]
        d.add({"type": "send", "id": "only"})
        armed.append(d._timer is not None)
        for _ in range(100):
            await asyncio.sleep(0.01)
            if sent:
                break
        armed.append(d._timer is not None)
        await d.detach()
        return armed

    assert asyncio.run(run()) == [False, True, False] and sent == ["only"]


def test_a_big_batch_is_compressed_and_read_back_also_from_a_base64_document():
    records = [{"type": "deliver", "id": f"7F000001000023290000000000{i:06X}",
                "group": "billing", "pulled_ms": 1000 + i} for i in range(200)]
    body, keys = encode_batch(records)
    assert body[:1] != b"{" and len(body) < 4096  # zlib: 200 records in a few KiB
    assert decode_batch(body) == records
    doc = {"body": None, "body_b64": base64.b64encode(body).decode()}  # as lookup_ops sends it
    assert decode_batch(body_of(doc)) == records
    assert decode_batch(b"\x78 not zlib") == []
    assert len(keys.split()) == len({trace_key(r["id"]) for r in records}) < 10


def test_a_send_record_carries_the_fuse_view_as_it_changes():
    """The fuse's view is made once per excluded set (a broker isolated all night made
    every traced send sort and dump it again) and follows the fuse when it changes."""
    from fuse import Fuse
    from tests.clock import ManualClock

    clock = ManualClock()
    fuse = Fuse([f"b{i}" for i in range(10)], clock=clock, warmup_calls=0, warmup_s=0)
    d = TraceDispatcher(lambda body, keys: None)
    d._thread = object()
    tracer = SendTracer(d, 1.0, "host-1", fuse=fuse)

    def view(broker: str):
        d._pending.clear()
        tracer.record("orders", None, None, 10, 1000, 0.001,
                      SendResult("SEND_OK", broker, 0, 1, msg_id="ID1"))
        [rec] = decode_batch(encode_batch(list(d._pending))[0])
        return rec["fuse"]

    assert view("b1") == "usable"
    fuse.report("b3", 0.001, ok=False)
    assert [view("b1"), view("b3"), view("b1")] == [
        {"broker": "usable", "excluded": ["b3"]}, {"broker": "overflow", "excluded": ["b3"]},
        {"broker": "usable", "excluded": ["b3"]}]
    fuse.report("b5", 0.001, ok=False)
    assert view("b5") == {"broker": "overflow", "excluded": ["b3", "b5"]}


def times_scheduled(thread: threading.Thread) -> int:
    with open(f"/proc/self/task/{thread.native_id}/schedstat") as f:
        return int(f.read().split()[2])


def test_the_thread_sleeps_while_nothing_waits_and_a_record_wakes_it():
    """No timer fires with nothing to send: the thread that flushed every interval woke
    ten times a second in every traced client, traffic or not."""
    sent = []
    d = TraceDispatcher(lambda body, keys: sent.append(keys), interval_s=0.02)
    try:
        d.add({"type": "send", "id": "first"})
        wait_for(lambda: sent == ["first"], 5, "the first batch")
        wait_for(lambda: d._idle, 5, "the thread idle")
        before = times_scheduled(d._thread)
        time.sleep(0.2)  # ten intervals with nothing to send
        # (at most once: it may have been preempted on its way into the wait)
        assert times_scheduled(d._thread) - before <= 1
        d.add({"type": "send", "id": "second"})  # wakes it; out an interval later
        wait_for(lambda: sent == ["first", "second"], 5, "the second batch")
    finally:
        d.close()
