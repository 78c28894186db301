"""PULL: the request round trip and limits, the answer's head."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker_core import protocol as p

queues = st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**62)), min_size=1,
                  max_size=50)


@given(st.text(max_size=20), st.text(min_size=1, max_size=20), queues,
       st.integers(1, p.MAX_PULL_MSGS), st.integers(0, 60_000), st.text(max_size=20))
def test_request_round_trip(group, topic, qs, max_msgs, wait, tag):
    req = p.PullRequest(group, topic, qs, max_msgs, wait, tag)
    assert p.decode_pull(p.encode_pull(req)) == req


def test_requests_out_of_range_are_refused():
    with pytest.raises(p.ProtocolError, match="max_msgs"):
        p.decode_pull(p.encode_pull(p.PullRequest("g", "t", [(0, 0)], 0)))
    with pytest.raises(p.ProtocolError, match="timeout"):
        p.decode_pull(p.encode_pull(p.PullRequest("g", "t", [(0, 0)], 1, 60_001)))
    with pytest.raises(p.ProtocolError, match="1..4096 queues"):
        p.encode_pull(p.PullRequest("g", "t", []))
    body = p.encode_pull(p.PullRequest("g", "t", [(0, 0), (1, 5)]))
    with pytest.raises(p.ProtocolError, match="needs 24 bytes"):
        p.decode_pull(body[:-1])
    with pytest.raises(p.ProtocolError, match="negative"):
        p.decode_pull(p.encode_pull(p.PullRequest("g", "t", [(-1, 0)])))


def test_head_round_trip_every_status():
    states = [(i, s, 7 + i, 1, 9, i) for i, s in enumerate(p.PULL_STATUSES)]
    head = p.encode_pull_head(states)
    got, end = p.decode_pull_head(head + b"records")
    assert end == len(head)
    assert [(s.queue_id, s.status, s.next_offset, s.min_offset, s.max_offset, s.count)
            for s in got] == states


def test_a_short_or_unknown_head_is_a_protocol_error():
    with pytest.raises(p.ProtocolError, match="shorter"):
        p.decode_pull_head(b"\0")
    with pytest.raises(p.ProtocolError, match="of 2 queues"):
        p.decode_pull_head(p.encode_pull_head([(0, "FOUND", 0, 0, 0, 0)] * 2)[:-1])
    bad = bytearray(p.encode_pull_head([(0, "FOUND", 0, 0, 0, 0)]))
    bad[6] = 99  # the status byte
    with pytest.raises(p.ProtocolError, match="unknown pull status"):
        p.decode_pull_head(bytes(bad))


@given(queues, queues, st.integers(0, 2**62))
def test_a_pull_carries_the_groups_commit(qs, commit, reset):
    req = p.PullRequest("g", "t", qs, 32, 15_000, commit=commit, reset=reset)
    assert p.decode_pull(p.encode_pull(req)) == req


def test_a_commit_trailer_that_does_not_hold_its_queues_is_refused():
    body = p.encode_pull(p.PullRequest("g", "t", [(0, 0)], commit=[(0, 5), (1, 6)]))
    with pytest.raises(p.ProtocolError, match="committing 2 queues"):
        p.decode_pull(body[:-1])


@given(st.integers(1, 2**64 - 1), st.integers(1, 2**32 - 1),
       st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(p.QUEUE_GONE, 2**62)),
                max_size=50))
def test_an_incremental_pull_carries_what_changed_even_nothing_and_dropped_queues(
        session, epoch, changes):
    req = p.PullRequest("g", "t", changes, 32, 15_000, session=session, epoch=epoch)
    assert req.incremental
    assert p.decode_pull(p.encode_pull(req)) == req


def test_a_pull_that_names_every_queue_cannot_drop_one_or_name_none():
    for session, epoch in ((0, 0), (7, 0)):  # no session; a session's first pull
        with pytest.raises(p.ProtocolError, match="negative"):
            p.decode_pull(p.encode_pull(p.PullRequest(
                "g", "t", [(0, p.QUEUE_GONE)], session=session, epoch=epoch)))
        with pytest.raises(p.ProtocolError, match="1..4096 queues"):
            p.encode_pull(p.PullRequest("g", "t", [], session=session, epoch=epoch))
    with pytest.raises(p.ProtocolError, match="negative"):  # only GONE is below 0
        p.decode_pull(p.encode_pull(p.PullRequest("g", "t", [(0, -2)], session=7, epoch=1)))
