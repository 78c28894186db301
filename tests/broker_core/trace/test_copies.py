"""A message's copies: what each is, the order of a path, and what they say of each other."""

from broker_core.client.tracing import SendTracer, traces
from broker_core.trace.copies import copy_of, in_paths
from broker_core.trace.timeline import build_timeline, join_copies

ORIGIN = "A" * 32


def doc(id_, topic, store_ms, queue_id=0, **props):
    return {"id": id_, "topic": topic, "keys": "order-7", "tags": "", "store_host": "h:1",
            "queue_id": queue_id, "queue_offset": 0, "born_ms": 1_000, "store_ms": store_ms,
            "durable": True, "body_bytes": 3, "properties": {"TRACE": "1", **props},
            "groups": {}}


FIRST = doc(ORIGIN, "orders", 1_000)
HELD = doc("B", "%SCHEDULE%", 1_010, queue_id=0, REAL_TOPIC="%RETRY%billing", REAL_QID="0",
           DELAY="1", RETRY_TIMES="1", ORIGIN_MSG_ID=ORIGIN)
RETRY = doc("C", "%RETRY%billing", 2_015, DELAY="1", RETRY_TIMES="1", ORIGIN_MSG_ID=ORIGIN,
            COPY_OF="B")
DEAD = doc("D", "%DLQ%billing", 3_000, RETRY_TIMES="2", ORIGIN_MSG_ID=ORIGIN)


def test_each_copy_says_what_it_is():
    assert copy_of(FIRST) is None
    held = copy_of(HELD)
    assert (held.kind, held.group, held.tries, held.to_topic) == ("delayed", "billing", 1,
                                                                 "%RETRY%billing")
    assert held.due_ms == 2_010 and held.sent_back  # queue 0 is level 1: 1 s
    assert (copy_of(RETRY).kind, copy_of(RETRY).made_from) == ("due", "B")
    assert (copy_of(DEAD).kind, copy_of(DEAD).group, copy_of(DEAD).tries) == (
        "dead letter", "billing", 2)
    producer_delayed = doc("E", "%SCHEDULE%", 1_000, queue_id=2, REAL_TOPIC="orders", DELAY="3")
    assert copy_of(producer_delayed).due_ms == 11_000 and not copy_of(producer_delayed).sent_back
    assert copy_of(doc("F", "orders", 2_000, COPY_OF="H")).kind == "committed"  # no DELAY
    assert copy_of(doc("G", "orders", 4_000, ORIGIN_MSG_ID=ORIGIN)).kind == "resent"
    assert copy_of(doc("C0", "%RETRY%billing", 2_000, ORIGIN_MSG_ID=ORIGIN)).kind == "due"


def test_a_path_is_its_first_message_then_its_copies_in_the_order_they_were_made():
    other = doc("Z", "orders", 2_500)  # another message of the key, stored in between
    docs = sorted([DEAD, other, RETRY, FIRST, HELD], key=lambda d: -d["store_ms"])
    assert [d["id"] for d in in_paths(docs)] == [ORIGIN, "B", "C", "D", "Z"]


def test_a_broker_made_copy_expects_no_send_and_a_delayed_copy_no_consumer():
    retry = build_timeline(RETRY, [])
    assert retry.missing == ["no consumer group has read this queue yet"]
    held = build_timeline(HELD, [])
    assert held.missing == ["no send record yet: group billing's consumer's trace batch is "
                            "not written (or was lost: it warns when its trace batches are "
                            "refused)", "no store record yet: the broker writes them once "
                            "a second"]


def test_copies_note_where_they_went_and_a_delayed_copy_found_nowhere_is_overdue():
    timelines = [build_timeline(d, []) for d in (FIRST, HELD, RETRY)]
    join_copies(timelines, now_ms=60_000)
    assert "stored again in %RETRY%billing as C, 5 ms after it was due" in timelines[1].notes
    alone = [build_timeline(HELD, [])]
    join_copies(alone, now_ms=2_010 + 5_000)  # within the slack: not yet
    assert not any("due" in m for m in alone[0].missing)
    join_copies(alone, now_ms=2_010 + 8_000)
    assert alone[0].missing[-1].startswith("due 8 s ago, and no copy of it in %RETRY%billing")


def test_a_copy_of_a_traced_message_is_traced_whatever_the_rate():
    tracer = SendTracer(dispatcher=None, rate=0.0, client_id="c")
    assert traces(tracer, {"TRACE": "1", "RETRY_TIMES": "1"})
    assert not traces(tracer, {"RETRY_TIMES": "1"}) and not traces(tracer, None)


def test_the_message_a_group_failed_says_what_it_was_sent_back_as():
    def read_by(id_):
        return [{"type": "deliver", "id": id_, "group": "billing", "client": "c",
                 "pulled_ms": 1_500, "committed_ms": 1_600}]

    timelines = [build_timeline(FIRST, read_by(ORIGIN)), build_timeline(HELD, []),
                 build_timeline(RETRY, read_by("C")), build_timeline(DEAD, [])]
    join_copies(timelines, now_ms=60_000)
    first, _held, retry, _dead = timelines
    assert "group billing failed it and sent it back: retry 1 as B" in first.notes
    assert "group billing failed it and sent it back: a dead letter as D" in retry.notes


def test_a_delayed_copy_stored_twice_after_a_restart_names_both():
    again = doc("C2", "%RETRY%billing", 2_900, DELAY="1", RETRY_TIMES="1", ORIGIN_MSG_ID=ORIGIN,
                COPY_OF="B")
    timelines = [build_timeline(d, []) for d in (FIRST, HELD, RETRY, again)]
    join_copies(timelines, now_ms=60_000)
    notes = [n for n in timelines[1].notes if n.startswith("stored again")]
    assert notes[0] == "stored again in %RETRY%billing as C, 5 ms after it was due"
    assert notes[1].startswith("stored again in %RETRY%billing as C2, 890 ms after it was due "
                               "(once more: at least once")
    assert not any(m.startswith("due") for m in timelines[1].missing)


def test_a_delayed_copy_not_due_yet_and_a_half_without_its_copy_say_so():
    held = [build_timeline(HELD, [])]
    join_copies(held, now_ms=1_510)
    assert "not due yet: in 0.5 s" in held[0].notes and not any(
        m.startswith("due") for m in held[0].missing)
    half = doc("H", "%TX_HALF%", 1_000, TRAN_MSG="true", REAL_TOPIC="paid", REAL_QID="0")
    alone = [build_timeline(half, [])]
    join_copies(alone, now_ms=60_000)
    assert alone[0].copy.kind == "half"
    assert "no committed copy found: pending, or rolled back" in alone[0].notes[-1]
    committed = doc("P", "paid", 1_200, COPY_OF="H")
    both = [build_timeline(half, []), build_timeline(committed, [])]
    join_copies(both, now_ms=60_000)
    assert "stored again in paid as P" in both[0].notes
    assert not any("no committed copy" in n for n in both[0].notes)
