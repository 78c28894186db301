"""The threaded producer's helper thread wakes for work due, not on a fixed beat: a
retry waiting out a backoff is sent when it is due, the thread asleep meanwhile (it
swept 50 times a second, the demo's throttled flood its busiest thread)."""

from __future__ import annotations

import math
import threading
import time

from broker_core.client.sweeper import MAX_SLEEP_S, CallSweeper
from tests.waiting import wait_for


def times_scheduled(thread: threading.Thread) -> int:
    """The thread's wake-ups so far, as the kernel counts them (schedstat)."""
    with open(f"/proc/self/task/{thread.native_id}/schedstat") as f:
        return int(f.read().split()[2])


def test_a_retry_due_later_is_sent_then_and_the_thread_sleeps_until_it():
    sent = threading.Event()
    sweeper = CallSweeper(None, time.monotonic, lambda *_retry: sent.set())
    try:
        sweeper.later(0.05, "warm-up", b"", None)  # the thread started and settled
        assert sent.wait(5)
        sent.clear()
        before = times_scheduled(sweeper._thread)
        start = time.monotonic()
        sweeper.later(1.2, "plan", b"payload", None)
        assert sent.wait(5)
        took = time.monotonic() - start
        woke = times_scheduled(sweeper._thread) - before
    finally:
        sweeper.close()
    assert took >= 1.2
    # woken by the retry, then at most every MAX_SLEEP_S until it was due: about 4
    # (with room for a busy host's preemptions; the old 20 ms sweep: 60 and more)
    assert woke <= 3 * (1 + 1.2 / MAX_SLEEP_S), woke


def test_a_retry_due_sooner_than_the_thread_would_wake_wakes_it():
    sent: list[str] = []
    done = threading.Event()
    sweeper = CallSweeper(None, time.monotonic,
                          lambda plan, *_rest: (sent.append(plan), done.set()))
    try:
        sweeper.later(MAX_SLEEP_S * 4, "late", b"", None)
        wait_for(lambda: sweeper._until < math.inf, 5, "asleep until the first is due")
        start = time.monotonic()
        sweeper.later(0.01, "soon", b"", None)
        assert done.wait(5)
        took = time.monotonic() - start
    finally:
        left = sweeper.close()
    assert sent == ["soon"] and took < MAX_SLEEP_S / 2
    assert [plan for plan, _p, _o in left] == ["late"]  # close hands back what still waits
