"""Queue locks on a manual clock: a lease granted, renewed, refused to another
client while live, taken over once it ran out, released, and handed to a slave
with the lease it had left."""

from __future__ import annotations

from broker_core.server.queue_locks import QueueLocks


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_live_lease_is_its_holders_and_an_expired_one_goes_to_the_next_asker():
    clock = Clock()
    locks = QueueLocks(clock, lambda: 1.7e9, lease_s=20)
    assert locks.lock("billing", "a", "orders", [0, 1]) == [0, 1]
    assert locks.lock("billing", "b", "orders", [1, 2]) == [2]  # 1 is a's
    assert locks.lock("other", "b", "orders", [1]) == [1]  # another group: its own locks
    clock.t += 15
    assert locks.lock("billing", "a", "orders", [0]) == [0]  # renewed: 1 not renewed
    clock.t += 6  # 21 s after a's last word on queue 1
    assert locks.lock("billing", "b", "orders", [0, 1]) == [1]
    assert (locks.granted, locks.expired, locks.refused) == (5, 1, 2)
    held = {(h["group"], h["queue"]): h["client_id"] for h in locks.holders()}
    # b's other locks, never renewed, ran out with a's
    assert held == {("billing", 0): "a", ("billing", 1): "b"}


def test_unlock_frees_only_the_holders_queues():
    locks = QueueLocks(Clock(), lambda: 0.0)
    locks.lock("g", "a", "t", [0, 1])
    assert locks.unlock("g", "b", "t", [0, 1]) == 0
    assert locks.unlock("g", "a", "t", [0]) == 1
    assert locks.lock("g", "b", "t", [0, 1]) == [0]


def test_a_promoted_slave_knows_who_held_what_for_the_lease_left():
    master_clock, slave_clock = Clock(), Clock()
    slave_clock.t = 5.0  # monotonic clocks of two hosts have nothing in common
    master = QueueLocks(master_clock, lambda: 1.7e9)
    master.lock("g", "a", "t", [3])
    master_clock.t += 12
    slave = QueueLocks(slave_clock, lambda: 0.0)
    slave.adopt(master.document())
    assert slave.lock("g", "b", "t", [3]) == []  # 8 s left of a's lease
    assert slave.holders()[0]["since"] == 1.7e9
    slave_clock.t += 8.1
    assert slave.lock("g", "b", "t", [3]) == [3]
