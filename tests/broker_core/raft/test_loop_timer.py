"""A Raft member's timers on uvloop's millisecond clock: when one runs, the time it
was armed for has come (else the tick finds nothing due and spins to the next
millisecond)."""

from __future__ import annotations

import pytest
import uvloop

from broker_core.raft.loop_timer import call_when_due

pytestmark = pytest.mark.timeout(60)


def test_a_timer_armed_for_the_cores_due_time_finds_it_reached_when_it_runs():
    loop = uvloop.new_event_loop()
    try:
        reached = []
        for _ in range(60):  # (armed plainly, about a third ran before their due time)
            ran = loop.create_future()
            due = loop.time() + 0.005  # (a beat, an election timeout: a few ms apart)
            call_when_due(loop, due, lambda due=due, ran=ran: ran.set_result(loop.time()
                                                                            >= due))
            reached.append(loop.run_until_complete(ran))
        assert all(reached), f"{reached.count(False)} of 60 ran before their due time"
    finally:
        loop.close()
