"""A Raft member's timers on uvloop's millisecond clock: when one runs, the time it
was armed for has come (else the tick finds nothing due and spins to the next
millisecond)."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from broker_core.client.aio_producer import AsyncProducer
from broker_core.raft.loop_timer import call_when_due
from tests.broker_core.raft.members import Group

pytestmark = pytest.mark.timeout(60)


def test_a_timer_armed_for_the_cores_due_time_finds_it_reached_when_it_runs():
    loop = uvloop.new_event_loop()
    try:
        reached = []
        for _ in range(60):  # (armed plainly, about a third run before their due time)
            ran = loop.create_future()
            due = loop.time() + 0.005  # a lazy follower's batch, as raft.pacing arms it
            call_when_due(loop, due, lambda due=due, ran=ran: ran.set_result(loop.time()
                                                                            >= due))
            reached.append(loop.run_until_complete(ran))
        assert all(reached), f"{reached.count(False)} of 60 ran before their due time"
    finally:
        loop.close()


def test_a_leader_feeding_its_lazy_follower_never_ticks_twice_early_in_one_millisecond(
        tmp_path):
    """One send at a time, the leader's lazy follower gets its batch 5 ms after the
    first entry held back. A tick that finds nothing due (the beat it was armed for
    moved on) arms again past the new due time; armed on the due time itself, a third
    of the batches' ticks found it a moment away and ticked again at once until the
    millisecond turned, dozens of times."""
    async def main():
        g = Group(tmp_path)
        await g.start_all()
        try:
            leader = await g.leader()
            group, loop = leader.group, asyncio.get_running_loop()
            early: list[float] = []  # the loop's time at each tick that found nothing due
            respun = 0
            tick = group._tick

            def watched() -> None:
                nonlocal respun
                now = loop.time()
                if now < group.node.next_due():
                    respun += bool(early) and early[-1] == now
                    early.append(now)
                tick()

            group._tick = watched
            async with AsyncProducer([leader.addr], fuse=False, timeout=5.0) as p:
                for i in range(100):  # (~40 batches: all of them pass 1 in 10^7 times
                    await p.send("orders", b"m%d" % i)  # with the timer armed on time)
            assert respun == 0, f"{respun} ticks ran early again in the same millisecond"
            assert group.node.prompt and group.node.held  # a lazy follower was fed
        finally:
            await g.close()

    uvloop.run(main())
