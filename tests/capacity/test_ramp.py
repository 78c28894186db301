"""The ramp's stop rules and knee on recorded series; the clock injected."""

import pytest

from capacity.errors import CapacityError
from capacity.ramp import Step, concurrencies, knee, ramp, stop_reason, usl
from capacity.usl import usl_throughput


def step(n: int, tps: float, p99: float = 3.0, errors: int = 0) -> Step:
    return Step(concurrency=n, seconds=8.0, sent=int(tps * 8), errors=errors, send_tps=tps,
                avg_ms=p99 / 3, p99_ms=p99, max_ms=p99 * 2)


def recorded(series: dict[int, Step]):
    """A run_step replaying a recorded ramp; the concurrencies asked for are kept."""
    asked = []

    def run(n: int) -> Step:
        asked.append(n)
        return series[n]

    return run, asked


def test_concurrency_doubles_up_to_the_cap():
    assert concurrencies(64) == [1, 2, 4, 8, 16, 32, 64]
    assert concurrencies(48) == [1, 2, 4, 8, 16, 32, 48]
    assert concurrencies(1) == [1]
    with pytest.raises(CapacityError, match="cap of 0"):
        concurrencies(0)


def test_stops_at_the_first_step_past_the_sla_and_the_knee_is_the_step_before():
    series = {1: step(1, 2_000), 2: step(2, 3_900), 4: step(4, 7_000, p99=8.0),
              8: step(8, 9_000, p99=25.0), 16: step(16, 9_500, p99=40.0)}
    run, asked = recorded(series)
    steps, why = ramp(run, cap=64)
    assert asked == [1, 2, 4, 8]  # 16 never run: 8 was past the SLA
    assert "p99 25.0 ms past the SLA (20 ms)" in why
    assert knee(steps) is series[4]


def test_stops_when_throughput_stops_rising_for_two_steps():
    series = {1: step(1, 5_000), 2: step(2, 9_000), 4: step(4, 12_000),
              8: step(8, 12_300), 16: step(16, 12_100), 32: step(32, 20_000)}
    run, asked = recorded(series)
    steps, why = ramp(run, cap=64)
    assert asked == [1, 2, 4, 8, 16]  # two steps under 5 % above 12,000: stop
    assert "throughput stopped rising" in why
    assert knee(steps) is series[8]


def test_one_flat_step_is_not_enough_to_stop():
    series = {1: step(1, 5_000), 2: step(2, 5_100), 4: step(4, 9_000), 8: step(8, 15_000)}
    run, asked = recorded(series)
    _steps, why = ramp(run, cap=8)
    assert asked == [1, 2, 4, 8]
    assert why == "the concurrency cap (8) reached"


def test_failing_sends_stop_the_ramp_and_never_make_the_knee():
    series = {1: step(1, 2_000), 2: step(2, 4_000), 4: step(4, 8_000, errors=900)}
    run, _asked = recorded(series)
    steps, why = ramp(run, cap=64)
    assert why.startswith("sends failing (900 of")
    assert knee(steps) is series[2]


def test_the_time_budget_is_read_on_the_injected_clock():
    now = [0.0]

    def run(n: int) -> Step:
        now[0] += 10.0  # each step takes 10 s of the fake clock
        return step(n, 1_000.0 * n)

    steps, why = ramp(run, cap=256, budget_s=25.0, clock=lambda: now[0])
    assert [s.concurrency for s in steps] == [1, 2, 4]  # the 4th would start at 30 s
    assert why == "the cell's time budget (25 s) spent"


def test_no_step_within_the_sla_means_no_knee():
    assert knee([step(1, 100, p99=30.0)]) is None
    assert stop_reason([]) is None


def test_usl_fitted_to_the_steps_finds_the_known_curve():
    ns = [1, 2, 4, 8, 16, 32, 64]
    xs = usl_throughput(ns, 0.05, 0.0005, 3_000.0)
    fit = usl([step(n, float(x)) for n, x in zip(ns, xs, strict=True)])
    assert fit.sigma == pytest.approx(0.05, rel=1e-3)
    assert fit.kappa == pytest.approx(0.0005, rel=1e-3)
    assert usl([step(1, 100), step(2, 190)]) is None  # two levels: no fit
