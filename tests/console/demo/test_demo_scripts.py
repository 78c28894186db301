"""The demo's scripted consumer group, and the scripts told in words (opening note, header)."""

from __future__ import annotations

import pytest

from console.demo.clients import WAREHOUSE_SCRIPT, processing_time, script_story
from console.demo.narration import now_playing, scripted_acts


@pytest.mark.parametrize("rate", [200.0, 1000.0, 5000.0])
def test_warehouse_falls_behind_whatever_the_rate_then_hangs_then_drains(rate):
    def per_second(at: float) -> float | None:
        t = processing_time(WAREHOUSE_SCRIPT, at, rate)
        return t if t is None else (float("inf") if t == 0 else 1 / t)

    assert per_second(5.0) == float("inf")  # keeps up
    assert per_second(30.0) < 0.7 * rate  # behind the producer: its lag grows (WARNING)
    assert per_second(55.0) is None  # hangs, heartbeating (STALLED)
    assert per_second(70.0) == float("inf")  # drains its backlog


def test_the_opening_hint_tells_only_the_scripts_that_run():
    acts = scripted_acts(4, faults=True, clients=True)
    assert "group-2's master stalls (6-36 s)" in acts and "hangs 50-62 s (STALLED)" in acts
    assert "warehouse's offsets moved 30 s back at 125 s" in acts
    quiet = scripted_acts(4, faults=False, clients=True)
    assert "faults" not in quiet and "offsets moved" not in quiet
    assert "warehouse" not in scripted_acts(0, faults=True, clients=False)
    assert "broker-4 answers 20 % errors (45-75 s)" in scripted_acts(0, True, False)
    assert scripted_acts(0, faults=False, clients=False).startswith("no faults")


def test_the_script_is_told_as_it_runs():
    assert script_story() == ("falls behind at 20 s (60 % of the rate: WARNING), "
                              "hangs 50-62 s (STALLED), then drains")
    assert script_story(((0.0, float("inf")), (10.0, 0.0), (15.0, float("inf")))) == \
        "hangs 10-15 s (STALLED), then drains"


def test_the_header_says_what_the_scripts_do_now():
    def now(at: float, groups: int = 4, **kw) -> str:
        return now_playing(at, groups, 6, **kw)

    assert now(10) == "0:10 · group-2's master stalls (6-36 s)"
    assert now(40) == "0:40 · no fault injected now, next at 45 s · warehouse behind (20-50 s)"
    assert now(55) == ("0:55 · group-3's master answers 20 % errors (45-75 s) · "
                       "warehouse hung (50-62 s)")
    assert now(100) == "1:40 · group-1's master killed at 95 s: its slave takes over"
    assert now(130) == "2:10 · warehouse's offsets moved 30 s back at 125 s"
    assert now(150 + 7) == "0:07 · group-2's master stalls (6-36 s)"  # the next cycle
    assert now(146) == "2:26 · no fault injected now"
    # six single-copy brokers: the same acts on broker-2 and broker-4
    assert now(48, groups=0) == "0:48 · broker-4 answers 20 % errors (45-75 s) · warehouse " \
        "behind (20-50 s)"
    assert now(55, faults=False, clients=False) == "0:55"
    # two groups: act 2 falls on group-2, as the demo aims it
    assert now(46, groups=2, clients=False) == "0:46 · group-2's master answers 20 % errors " \
        "(45-75 s)"


def test_the_side_stories_scale_with_the_demo_below_its_full_rate():
    from console.demo.clients import (
        BATCH_FLOOR,
        BATCH_RATE,
        PAY_FLOOR,
        PAY_RATE,
        RMQ_FLOOR,
        RMQ_RATE,
        story_rates,
    )

    full = (BATCH_RATE, PAY_RATE, RMQ_RATE)
    assert story_rates(1000) == story_rates(5000) == story_rates(0) == full
    assert story_rates(500) == (BATCH_RATE / 2, PAY_RATE / 2, RMQ_RATE / 2)
    assert story_rates(10) == (BATCH_FLOOR, PAY_FLOOR, RMQ_FLOOR)  # never silent: the floors
