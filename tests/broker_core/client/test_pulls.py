"""The pull pipeline's parts that need no broker: the down list's doubling and a
pull answer that does not add up (the rest runs against brokers in test_consumer)."""

from __future__ import annotations

import pytest

from broker_core.client.pulls import DOWN_MAX_S, DOWN_S, DownList, read_pull_answer
from broker_core.protocol import ProtocolError
from broker_core.protocol.pull import encode_pull_head


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_failing_address_waits_twice_as_long_each_time_up_to_the_cap():
    clock = Clock()
    down = DownList(clock)
    assert down.up("a", clock.now)
    waits = []
    for _ in range(7):
        down.failed("a")
        start = clock.now
        while not down.up("a", clock.now):
            clock.now += 0.25
        waits.append(clock.now - start)
    assert waits == [DOWN_S, 2 * DOWN_S, 4 * DOWN_S, 8 * DOWN_S, DOWN_MAX_S, DOWN_MAX_S,
                     DOWN_MAX_S]
    down.answered("a")  # an answer ends the run of failures
    down.failed("a")
    assert not down.up("a", clock.now + DOWN_S - 0.01) and down.up("a", clock.now + DOWN_S)
    assert down.up("b", clock.now)


def test_a_hold_does_not_count_as_a_failure():
    clock = Clock()
    down = DownList(clock)
    down.failed("a")
    down.hold("a", 0.5)
    assert down.up("a", 0.5)
    down.failed("a")  # the second failure in a row all the same
    assert not down.up("a", 2 * DOWN_S - 0.01)


def test_an_answer_with_bytes_past_its_records_is_refused():
    head = encode_pull_head([(0, "NO_NEW_MSG", 5, 0, 5, 0)])
    ((state, msgs, corrupt),) = read_pull_answer(head)
    assert (state.queue_id, state.next_offset, msgs, corrupt) == (0, 5, [], 0)
    with pytest.raises(ProtocolError, match="3 unexpected bytes"):
        read_pull_answer(head + b"xyz")


def test_a_follower_reader_pulls_from_its_follower_and_from_the_leader_only_when_none_answers():
    from broker_core.client.pool import ConnectionPool
    from broker_core.client.pulls import Pulls
    from broker_core.ha.raft_routes import RaftRoutes
    from tests.clock import ManualClock

    a, b, c = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"
    routes = RaftRoutes({"g": [a, b, c]})  # (not started: told who leads below)
    routes._learn("g", {"leader": "r0", "term": 1, "master_addr": a})
    clock = ManualClock()

    def pulls(read_followers):
        p = Pulls("grp", "t", ConnectionPool({}), routes, DownList(clock), 1.0, clock,
                  lambda q: True)
        p.read_followers = read_followers
        return p

    assert pulls(None)._pull_addr("g") == a  # from the leader
    first, second = pulls(0), pulls(1)  # consumers of a group spread over the followers
    assert (first._pull_addr("g"), second._pull_addr("g")) == (b, c)
    first._down.failed(b)
    assert first._pull_addr("g") == c  # its follower down: the other
    first._down.failed(c)
    assert first._pull_addr("g") == a  # no follower answers: the leader
