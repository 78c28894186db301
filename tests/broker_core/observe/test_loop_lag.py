"""The broker's loop-lag monitor on a virtual clock."""

import pytest

from broker_core.observe.loop_lag import LoopLag


class VirtualLoop:
    """The two calls the probe makes of an event loop, on a virtual clock: timers are
    kept, and `advance` runs those that fall due (counting the wake-ups)."""

    def __init__(self, t: list[float]) -> None:
        self.t, self.timers, self.wakeups = t, [], 0

    def call_later(self, delay, fn):
        timer = [self.t[0] + delay, fn, False]
        self.timers.append(timer)

        class Handle:
            def cancel(self_inner):
                timer[2] = True

        return Handle()

    def advance(self, seconds: float, step: float = 0.001, late: float = 0.0) -> None:
        end = self.t[0] + seconds
        while self.t[0] < end - 1e-12:
            self.t[0] += step
            for timer in [x for x in self.timers if x[0] <= self.t[0] and not x[2]]:
                self.timers.remove(timer)
                self.t[0] += late  # the loop reached it this late
                self.wakeups += 1
                timer[1]()


def test_the_worst_lateness_of_each_second_is_kept_a_minute():
    t = [100.0]
    lag = LoopLag(clock=lambda: t[0], interval_s=0.010)
    lag.sample(0.002)
    t[0] += 1.0
    lag.sample(0.050)
    assert lag.worst(10) == pytest.approx(0.050) and lag.late_total == 1
    t[0] += 20.0
    lag.sample(0.001)
    assert lag.worst(10) == pytest.approx(0.001)  # the 50 ms is out of the 10 s window
    assert lag.worst(60) == pytest.approx(0.050)
    t[0] += 61.0
    assert lag.worst(60) == pytest.approx(0.0)  # kept a minute, no more


def test_an_idle_loop_gets_no_beat_and_work_arms_one():
    t = [100.0]
    loop = VirtualLoop(t)
    lag = LoopLag(clock=lambda: t[0], interval_s=0.025)
    lag.start(loop)
    loop.advance(10.0)
    assert lag.beats == 1 and loop.wakeups == 1  # the start's beat, then nothing

    for _ in range(40):  # a second of requests, one every 25 ms: a beat each interval
        lag.poke()
        loop.advance(0.025)
    assert 38 <= lag.beats - 1 <= 41
    before = loop.wakeups
    loop.advance(60.0)  # idle again: at most the beat already armed
    assert loop.wakeups - before <= 1


def test_a_beat_measures_how_late_the_loop_reached_it():
    t = [100.0]
    loop = VirtualLoop(t)
    lag = LoopLag(clock=lambda: t[0], interval_s=0.025)
    lag.start(loop)
    lag.poke()
    loop.advance(0.1, late=0.060)  # the loop blocked 60 ms past each beat's time
    assert lag.worst(1) == pytest.approx(0.060, abs=0.002)
    assert lag.late_total >= 1
