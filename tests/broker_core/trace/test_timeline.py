"""A timeline from a message document and trace records: delays per group,
redeliveries, and what is missing said in words."""

from broker_core.trace.timeline import build_timeline


def doc(**kw):
    d = {"id": "ID1", "topic": "orders", "keys": "order-42", "tags": "", "store_host": "h:1",
         "queue_id": 2, "queue_offset": 5000, "born_ms": 1000, "store_ms": 1002,
         "durable": True, "body_bytes": 10, "properties": {"TRACE": "1"},
         "groups": {"billing": 5001, "warehouse": 3798, "audit": 6000}}
    d.update(kw)
    return d


def test_delays_redeliveries_and_the_missing():
    records = [
        {"type": "send", "id": "ID1", "born_ms": 990, "client": "c1", "broker": "b1"},
        {"type": "store", "id": "ID1", "code": "OK"},
        {"type": "deliver", "id": "ID1", "group": "billing", "client": "x", "pulled_ms": 1100,
         "committed_ms": 1150},
        {"type": "deliver", "id": "ID1", "group": "billing", "client": "y", "pulled_ms": 1300,
         "committed_ms": None},
    ]
    t = build_timeline(doc(), records, {"h:1": "broker-1"}.get)
    assert t.broker == "broker-1" and t.delay_ms("billing") == 110
    assert [d.client for d in t.deliveries["billing"]] == ["x", "y"]
    assert "group billing: delivered 2 times (1 redelivery)" in t.notes
    assert ("stored, never delivered to group warehouse: its offset on queue 2 is 1,203 behind"
            in t.missing)
    assert any("audit consumed it" in n for n in t.notes)  # past it, but does not trace


def test_no_records_at_all():
    t = build_timeline(doc(properties={}, groups={}), [])
    assert t.missing == []  # an untraced message lacks nothing: it says why there is none
    assert "no send record: the producer does not trace this message" in t.notes


def test_a_stored_summary_stands_for_the_store_record_and_the_message_fills_the_send():
    records = [
        {"type": "send", "id": "ID1", "born_ms": 990, "client": "c1", "broker": "b1",
         "status": "SEND_OK", "rt_ms": 1.5},
        {"type": "stored", "addr": "h:1", "count": 40, "from_phys": 0, "to_phys": 9000,
         "code": "OK", "flush": "async", "replication": "sync"},
    ]
    t = build_timeline(doc(), records)
    assert (t.store["code"], t.store["replication"], t.store["queue_offset"]) == ("OK", "sync",
                                                                                 5000)
    assert (t.send["topic"], t.send["queue_id"], t.send["addr"]) == ("orders", 2, "h:1")
    assert not any("store record" in m for m in t.missing)
    t = build_timeline(doc(), records[:1])
    assert "no store record yet: the broker writes them once a second" in t.missing
