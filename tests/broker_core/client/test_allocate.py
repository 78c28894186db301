"""A consumer group's queue allocation (RocketMQ's averaging): every queue to exactly
one member whatever the member and queue lists' order, shares differing by at most
one, the first members taking the larger shares, and a member not in the group none."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker_core.client.membership import allocate

QUEUES = [(b, q) for b in ("broker-1", "broker-2", "broker-3") for q in range(4)]


@given(st.integers(1, 20), st.integers(0, 30), st.randoms())
def test_every_queue_to_exactly_one_member_and_shares_even(k, n, rnd):
    members = [f"c{i}" for i in range(k)]
    queues = [(f"b{i % 3}", i) for i in range(n)]
    shares = {}
    for me in members:
        shuffled_m, shuffled_q = members[:], queues[:]
        rnd.shuffle(shuffled_m)
        rnd.shuffle(shuffled_q)  # each member may see the lists in its own order
        shares[me] = allocate(shuffled_m, shuffled_q, me)
    owned = [q for share in shares.values() for q in share]
    assert sorted(owned) == sorted(queues)  # each exactly once
    sizes = [len(shares[m]) for m in sorted(members)]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


def test_twelve_queues_over_five_members_and_a_stranger():
    members = ["c3", "c1", "c5", "c2", "c4"]
    got = {m: allocate(members, QUEUES, m) for m in sorted(members)}
    assert [len(s) for s in got.values()] == [3, 3, 2, 2, 2]
    assert got["c1"] == [("broker-1", 0), ("broker-1", 1), ("broker-1", 2)]  # contiguous
    assert allocate(members, QUEUES, "stranger") == []
    assert allocate(members, [], "c1") == []


@pytest.mark.parametrize("seed", range(3))
def test_the_same_lists_give_the_same_shares(seed):
    rnd = random.Random(seed)
    members = [f"c{i}" for i in range(4)]
    a = allocate(rnd.sample(members, 4), rnd.sample(QUEUES, len(QUEUES)), "c2")
    b = allocate(members, QUEUES, "c2")
    assert a == b
