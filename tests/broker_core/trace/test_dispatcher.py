"""The trace dispatcher batches records into messages keyed by message id, and never
blocks or raises: a full buffer or a failed send drops and counts."""

from broker_core.trace.dispatcher import TraceDispatcher
from broker_core.trace.records import Sampler, decode_batch, encode_batch


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
