"""Wire bodies: round trips, and decoders that only ever raise ProtocolError."""


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core import protocol as p

texts = st.text(max_size=40)
bodies = st.binary(max_size=300)
props = st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=8), max_size=3)
messages = st.builds(p.OutMessage, bodies, texts, texts, props)


@given(st.text(min_size=1, max_size=50), st.integers(-1, 1000), messages)
def test_send_round_trip(topic, qid, msg):
    assert p.decode_send(p.encode_send(topic, qid, msg)) == (topic, qid, msg)


@given(st.text(min_size=1, max_size=50), st.lists(messages, min_size=1, max_size=20))
def test_batch_round_trip(topic, msgs):
    assert p.decode_send_batch(p.encode_send_batch(topic, 2, msgs)) == (topic, 2, msgs)


@given(st.text(min_size=1, max_size=50), st.integers(-1, 1000), messages)
def test_the_brokers_one_pass_send_decode_agrees_with_the_general_one(topic, qid, msg):
    body = p.encode_send(topic, qid, msg)
    fields = p.decode_send_fields(body)
    assert fields[:3] == (topic, qid, msg.tags) and fields[3] == msg.keys
    assert p.decode_props(fields[4]) == msg.properties and fields[5] == msg.body


def test_truncated_body_fields_are_errors_not_crashes():
    good = p.encode_send("orders", 0, p.OutMessage(b"hello", "tag"))
    for cut in range(len(good)):
        with pytest.raises(p.ProtocolError):
            p.decode_send(good[:cut])
    with pytest.raises(p.ProtocolError, match="trailing"):
        p.decode_send(good + b"\0")
    for cut in range(len(good)):
        with pytest.raises(p.ProtocolError):
            p.decode_send_fields(good[:cut])
    with pytest.raises(p.ProtocolError, match="does not hold"):
        p.decode_send_fields(good + b"\0")


def test_a_body_that_is_not_bytes_is_named_as_such():
    with pytest.raises(TypeError, match="a message body is bytes, not str"):
        p.encode_send("orders", 0, p.OutMessage("hello"))
    assert p.decode_send(p.encode_send("orders", 0, p.OutMessage(bytearray(b"hi"))))[2].body \
        == b"hi"  # anything bytes-like is taken


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_fuzz_frame_decoder_and_body_decoders(data):
    """Arbitrary bytes: the decoders answer frames or ProtocolError, nothing else."""
    for decode in (
        p.decode_send,
        p.decode_send_batch,
        p.decode_pull,
        p.decode_json,
        p.decode_send_fields,
        p.decode_pull_head,
    ):
        try:
            decode(data)
        except p.ProtocolError:
            pass
    decoder = p.FrameDecoder()
    try:
        for header, body in decoder.feed(p.encode_frame(p.Op.SEND, 1, b"ok")[:5] + data):
            assert isinstance(body, bytes) and header.length >= 12
    except p.ProtocolError:
        pass


@settings(max_examples=80, deadline=None)
@given(st.binary(min_size=1, max_size=64), st.integers(0, 60))
def test_fuzz_valid_header_random_body(body, op):
    """A well-framed request with a random body decodes to frames; bodies fail cleanly."""
    frames = p.FrameDecoder().feed(p.encode_frame(op, 5, body))
    assert len(frames) == 1 and frames[0][1] == body


def test_send_answers_carry_the_brokers_service_time_and_old_ones_decode():
    old = p.encode_send_response(1, 42, 4096, 1_700_000_000_000)
    assert p.decode_send_response(old) == (1, 42, 4096, 1_700_000_000_000, None)
    timed = p.with_service_time(old, 0.0123456)
    assert p.decode_send_response(timed) == (1, 42, 4096, 1_700_000_000_000, 0.012346)
    batch = p.with_service_time(p.encode_batch_response(2, 7, 100), 5000.0)  # capped
    assert p.decode_batch_response(batch) == (2, 7, 100, 0xFFFFFFFF / 1e6)
    with pytest.raises(p.ProtocolError, match="trailing"):
        p.decode_send_response(timed + b"\x00")


def test_brokers_on_this_host_are_told_apart_from_remote_ones():
    from broker_core.client.connection import is_local

    assert is_local("127.0.0.1:10911") and is_local("localhost:1") and is_local("[::1]:2")
    assert not is_local("203.0.113.7:10911")  # TEST-NET-3: never this host
    assert not is_local("broker-a.example:10911")  # names are not resolved


def test_send_answer_carries_the_store_host_for_the_message_id():
    from broker_core.protocol.record import pack_host

    answer = p.encode_send_response(1, 42, 4096, 1_700_000_000_000, pack_host("10.0.0.7:10911"))
    assert p.decode_send_answer(answer) == (1, 42, 4096, 1_700_000_000_000, None,
                                            "10.0.0.7:10911")
    timed = p.with_service_time(answer, 0.002)
    assert p.decode_send_answer(timed)[4:] == (0.002, "10.0.0.7:10911")
    assert p.decode_send_response(timed) == (1, 42, 4096, 1_700_000_000_000, 0.002)
    old = p.encode_send_response(1, 42, 4096, 1_700_000_000_000)
    assert p.decode_send_answer(old)[5] is None  # an older broker: no id


def test_a_send_answer_frame_in_one_pack_reads_as_the_parts_would():
    from broker_core.protocol.record import pack_host

    host = pack_host("10.0.0.7:10911")
    frame = p.send_answer_frame(77, p.Code.SLAVE_NOT_AVAILABLE, 1, 42, 4096, 1_700_000_000_000,
                                host[:4], 10911, 0.002)
    header = p.decode_header(frame)
    assert (header.op, header.request_id, header.code, header.is_response) == \
        (p.Op.SEND, 77, p.Code.SLAVE_NOT_AVAILABLE, True)
    assert header.length == len(frame) - p.LENGTH_SIZE
    assert p.decode_send_answer(frame[p.HEADER_SIZE:]) == \
        (1, 42, 4096, 1_700_000_000_000, 0.002, "10.0.0.7:10911")
    capped = p.send_answer_frame(1, 0, 0, 0, 0, 0, host[:4], 1, 1e9)
    assert p.decode_send_answer(capped[p.HEADER_SIZE:])[4] == 0xFFFFFFFF / 1e6
