"""A consumer's delivery tracer on an injected clock: a traced delivery is held for
its commit and goes out without one once `hold_s` has passed (no sleep)."""

from broker_core.client.tracing import DeliveryTracer
from broker_core.protocol.record import Message, pack_host
from broker_core.trace.dispatcher import TraceDispatcher
from broker_core.trace.records import PROP_TRACE
from tests.clock import ManualClock


def traced(offset: int) -> Message:
    return Message("orders", 1, offset, b"x", None, None, 0, 0, 100 * offset, 99,
                   {PROP_TRACE: "1"}, 0, pack_host("127.0.0.1:10911"))


def test_a_delivery_not_committed_in_time_goes_out_uncommitted():
    sent = []
    dispatcher = TraceDispatcher(lambda body, keys: sent.append(keys))
    mono = ManualClock(10.0)
    tracer = DeliveryTracer(dispatcher, 1.0, "billing", "c1", hold_s=2.0, monotonic=mono)
    tracer.polled("broker-1", [traced(0), traced(1)])
    mono.advance(1.9)
    tracer.polled("broker-1", [])  # each poll releases what waited too long: none yet
    assert dispatcher.counters["records"] == 0
    tracer.committed(("broker-1", 1), 1)  # offset 0 committed: it goes, with its commit
    assert dispatcher.counters["records"] == 1
    mono.advance(0.2)
    tracer.polled("broker-1", [])  # offset 1 held 2.1 s: out without a commit
    assert dispatcher.counters["records"] == 2
    dispatcher.close()
    assert dispatcher.counters["sent"] == 2 and sent  # both in the trace topic's batches


def test_a_trace_topic_refusing_batches_is_said_once_a_minute_and_summed_up(caplog):
    """A user without pub on %TRACE% lost every trace record in silence (a debug line a
    batch); `floodgate trace` could only say the send record was "not written (or lost)"."""
    refused = ["no broker takes this send: broker-1: NO_PERMISSION: user app may not pub"]

    def send(body, keys):
        if refused:
            raise RuntimeError(refused[0])

    mono = ManualClock(10.0)
    dispatcher = TraceDispatcher(send, batch=2, clock=mono)
    with caplog.at_level("WARNING", "broker_core.trace.dispatcher"):
        for i in range(6):
            dispatcher.add({"n": i})
        dispatcher.flush()
        mono.advance(59)
        dispatcher.add({"n": 6})
        dispatcher.flush()
        mono.advance(1)
        dispatcher.add({"n": 7})
        dispatcher.flush()
    assert [r.getMessage() for r in caplog.records] == [
        f"trace batches not sent (1 so far, 2 records dropped): {refused[0]}",
        f"trace batches not sent (5 so far, 8 records dropped): {refused[0]}"]
    assert dispatcher.figures() == {"records": 8, "sent": 0, "dropped": 8, "messages": 0,
                                    "failed": 5, "last_error": refused[0]}
    assert dispatcher.summary() == (
        f"8 records, 0 sent in 0 batches, 8 dropped (5 batches not sent; latest: {refused[0]})")
    refused.clear()
    dispatcher.add({"n": 8})
    dispatcher.flush()
    assert dispatcher.summary().startswith("9 records, 1 sent in 1 batch, 8 dropped")
    dispatcher.close()
