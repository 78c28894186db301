"""The broker's loop-lag monitor on a virtual clock."""

import pytest

from broker_core.observe.loop_lag import LoopLag


def test_late_beats_are_the_loops_lag_worst_per_second_kept_a_minute():
    t = [100.0]
    lag = LoopLag(clock=lambda: t[0], interval_s=0.010)

    def run(seconds: float) -> list[float]:
        out = []
        for _ in range(round(seconds / 0.010)):
            t[0] += 0.010
            out.append(lag.beat())
        return out

    assert max(run(2.0)) == pytest.approx(0.0, abs=1e-9)
    t[0] += 0.060  # the loop blocked: the next beat comes 50 ms late
    assert lag.beat() == pytest.approx(0.050)
    assert lag.worst(10) == pytest.approx(0.050) and lag.late_total == 1
    run(20.0)
    assert lag.worst(10) == pytest.approx(0.0, abs=1e-9)  # out of the 10 s window
    assert lag.worst(60) == pytest.approx(0.050)
    run(61.0)
    assert lag.worst(60) == pytest.approx(0.0, abs=1e-9)  # kept a minute, no more
