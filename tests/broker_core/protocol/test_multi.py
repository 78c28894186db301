"""SEND_MULTI's bodies: round trips against SEND's own encoding, answers that give each
message its offsets, and decoders that only ever raise ProtocolError."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker_core import protocol as p
from broker_core.protocol.multi import (
    decode_multi,
    decode_multi_answer,
    encode_message,
    encode_multi,
    encode_multi_answer,
    send_prefix,
)

texts = st.text(max_size=40)
props = st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=8), max_size=3)
messages = st.builds(p.OutMessage, st.binary(max_size=300), texts, texts, props)


@given(st.text(min_size=1, max_size=50), st.integers(-1, 1000),
       st.lists(messages, min_size=1, max_size=20))
def test_multi_round_trip_each_message_as_a_send_carries_it(topic, qid, msgs):
    got_topic, got_qid, got = decode_multi(encode_multi(topic, qid, [encode_message(m)
                                                                      for m in msgs]))
    assert (got_topic, got_qid) == (topic, qid)
    for m, (tags, keys, text, body) in zip(msgs, got, strict=True):
        assert (tags, keys, p.decode_props(text), bytes(body)) == \
            (m.tags, m.keys, m.properties, m.body)
    one = msgs[0]  # a message alone is a SEND: the same bytes after SEND's head
    assert send_prefix(topic, qid) + encode_message(one) == p.encode_send(topic, qid, one)


def test_an_answer_gives_each_message_its_physical_offset():
    host = bytes([10, 0, 0, 7]) + (10911).to_bytes(4, "big")
    body = encode_multi_answer(3, 100, 1_700_000_000_000, host, 4096, [200, 210, 190], 0.0015)
    qid, first, ms, where, offsets, service = decode_multi_answer(body)
    assert (qid, first, ms, where) == (3, 100, 1_700_000_000_000, "10.0.0.7:10911")
    assert offsets == [4096, 4296, 4506] and service == pytest.approx(0.0015)
    with pytest.raises(p.ProtocolError):
        decode_multi_answer(body[:-1])
    with pytest.raises(p.ProtocolError):
        decode_multi_answer(body + b"\0")


def test_truncated_or_inflated_multis_are_errors_not_crashes():
    good = encode_multi("orders", -1, [encode_message(p.OutMessage(b"a" * 10, "t", "k1")),
                                       encode_message(p.OutMessage(b"b", keys="k2"))])
    for cut in range(len(good)):
        with pytest.raises(p.ProtocolError):
            decode_multi(good[:cut])
    with pytest.raises(p.ProtocolError, match="unexpected bytes"):
        decode_multi(good + b"\0")
    with pytest.raises(p.ProtocolError, match="messages"):
        encode_multi("orders", 0, [])


@given(st.binary(max_size=200))
def test_any_bytes_decode_or_raise_protocol_error(junk):
    try:
        decode_multi(junk)
    except p.ProtocolError:
        pass
