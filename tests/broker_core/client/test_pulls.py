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
