"""Choosing an ordered send's queue: stable by key over a fixed queue order, never
moved by the fuse unless the producer allows reordering."""

import pytest

from broker_core.client.attempts import SendFailed
from broker_core.client.ordering import OrderedQueues, choose, key_slot

QUEUES = tuple((b, q) for b in ("b1", "b2", "b3", "b4") for q in range(4))


def test_a_key_has_one_queue_whatever_the_process():
    assert key_slot("order-42", 16) == key_slot("order-42", 16)  # crc32, not hash()
    slots = {key_slot(f"order-{i}", 16) for i in range(1000)}
    assert len(slots) == 16  # and keys spread over every queue


def test_an_isolated_broker_fails_its_keys_or_with_allow_reorder_moves_them_on():
    key = next(f"k{i}" for i in range(100) if choose(QUEUES, f"k{i}", set(), False)[0] == "b2")
    own = choose(QUEUES, key, set(), False)
    with pytest.raises(SendFailed, match="ORDER_QUEUE_UNAVAILABLE.*isolated by the fuse"):
        choose(QUEUES, key, {"b2"}, False)
    moved = choose(QUEUES, key, {"b2"}, True)
    assert moved[0] != "b2" and moved == QUEUES[(QUEUES.index(own) + 4 - own[1]) % 16]
    assert choose(QUEUES, key, set(), False) == own  # released: back to its own queue


def test_queues_are_learned_once_and_a_silent_broker_refuses_a_guess():
    asked = []

    def route(broker, topic):
        asked.append(broker)
        if broker == "b3" and topic == "t2":
            raise ConnectionError("no answer")
        return 2

    now = [0.0]
    oq = OrderedQueues(lambda: ["b2", "b1", "b3"], route, clock=lambda: now[0])
    assert oq.queues("t") == (("b1", 0), ("b1", 1), ("b2", 0), ("b2", 1), ("b3", 0), ("b3", 1))
    oq.queues("t")
    assert len(asked) == 3  # cached
    now[0] = 31.0
    oq.queues("t")
    assert len(asked) == 6  # after ROUTES_TTL_S
    with pytest.raises(SendFailed, match="cannot learn the queues of 't2'.*b3: no answer"):
        oq.queues("t2")
