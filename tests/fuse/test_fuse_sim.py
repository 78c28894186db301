"""The policy simulator: deterministic for a seed, and each policy behaves as modelled."""

from __future__ import annotations

import pytest

from fuse import FuseError
from fuse.sim import simulate
from fuse.sim_policies import PyBreakerModel, RocketMQFaultStrategy
from fuse.sim_scenarios import SCENARIOS, build_cluster

SMALL = {"brokers": 10, "seconds": 20.0, "rate": 1000.0}


def test_same_seed_same_result_to_the_last_digit():
    a = simulate("pagecache-stall", "fuse", seed=5, **SMALL)
    b = simulate("pagecache-stall", "fuse", seed=5, **SMALL)
    c = simulate("pagecache-stall", "fuse", seed=6, **SMALL)
    assert a == b
    assert a.to_dict() != c.to_dict()


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_scenario_runs_and_our_fuse_keeps_the_cap(scenario):
    r = simulate(scenario, "fuse", seed=1, **SMALL)
    assert r.sends > 15_000 and 0.0 <= r.share_over_20ms <= 1.0
    assert r.max_excluded <= 3


def test_fuse_cuts_pagecache_stalls_far_below_rocketmq():
    kw = {"brokers": 10, "seconds": 60.0, "rate": 2000.0, "seed": 2}
    ours = simulate("pagecache-stall", "fuse", **kw)
    rocket = simulate("pagecache-stall", "rocketmq", **kw)
    plain = simulate("pagecache-stall", "none", **kw)
    assert ours.share_over_20ms <= 0.0001
    assert ours.share_over_20ms <= rocket.share_over_20ms / 10 <= plain.share_over_20ms / 10


def test_outage_fails_fewer_sends_with_the_fuse():
    kw = {"brokers": 10, "seconds": 40.0, "rate": 1000.0, "seed": 3}
    assert simulate("outage", "fuse", **kw).failed < simulate("outage", "none", **kw).failed / 10


def test_cluster_slow_fuse_excludes_nothing_and_fails_no_more_than_none():
    kw = {"brokers": 10, "seconds": 40.0, "rate": 2000.0, "seed": 4}
    ours = simulate("cluster-slow", "fuse", **kw)
    assert ours.max_excluded == 0
    assert ours.failed <= simulate("cluster-slow", "none", **kw).failed


def test_half_slow_hits_the_cap():
    r = simulate("half-slow", "fuse", seed=1, **SMALL)
    assert r.max_excluded == 3


def test_rocketmq_latency_table():
    f = RocketMQFaultStrategy.not_available_s
    assert [f(ms) for ms in (10, 99, 100, 549, 550, 1000, 2000, 3000, 15000, 30000)] == [
        0, 0, 0, 0, 30, 60, 120, 180, 600, 600]


def test_rocketmq_model_isolates_a_failed_broker_for_ten_minutes():
    now = [0.0]
    policy = RocketMQFaultStrategy(3, lambda: now[0], 0)
    policy.end(1, None, 0.001, ok=False)
    assert policy.excluded() == 1
    assert 1 not in {policy.choose(None) for _ in range(9)}
    now[0] = 600.0
    assert policy.excluded() == 0


def test_pybreaker_model_opens_after_five_consecutive_failures_and_half_opens():
    now = [0.0]
    policy = PyBreakerModel(2, lambda: now[0], 0)
    for _ in range(4):
        policy.end(0, policy.begin(0), 0.001, ok=False)
    policy.end(0, policy.begin(0), 0.001, ok=True)  # success resets the count
    for _ in range(5):
        policy.end(0, policy.begin(0), 0.001, ok=False)
    assert policy.state[0] == "open"
    assert {policy.choose(None) for _ in range(4)} == {1}
    now[0] = 60.0
    picks = [policy.choose(None) for _ in range(4)]
    assert picks.count(0) == 1  # one half-open trial, the rest go elsewhere
    policy.end(0, True, 0.001, ok=True)
    assert policy.state[0] == "closed"


def test_stall_holds_calls_in_flight_until_it_ends():
    cluster = build_cluster("pagecache-stall", 10, 60.0, 1000.0, seed=1)
    stall = cluster._episodes[0][0]
    duration, ok = cluster.attempt(0, stall.start + 0.1)
    assert ok and duration >= stall.end - stall.start - 0.1


@pytest.mark.parametrize("args", [
    {"scenario": "nope", "policy": "fuse"},
    {"scenario": "outage", "policy": "nope"},
    {"scenario": "outage", "policy": "fuse", "brokers": 0},
    {"scenario": "outage", "policy": "fuse", "rate": -1.0},
    {"scenario": "outage", "policy": "fuse", "seconds": 1e9},
])
def test_bad_arguments_are_fuse_errors(args):
    with pytest.raises(FuseError):
        simulate(**args)


def test_deterministic_across_processes_and_hash_seeds():
    import json
    import os
    import subprocess
    import sys

    code = ("import json; from fuse.sim import simulate; "
            "print(json.dumps(simulate('half-slow', 'fuse', brokers=10, seconds=120.0, "
            "rate=500.0, seed=9).to_dict()))")  # size at which a set-order bug showed
    outputs = []
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=120, check=True)
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]


def test_client_pause_isolates_the_stalled_broker_and_nobody_else():
    r = simulate("client-pause", "fuse", brokers=10, seconds=60.0, rate=2000.0, seed=1)
    assert r.false_isolations == 0
    assert 1 <= r.isolations  # broker 0, the stalled one
    assert r.share_over_20ms < simulate("client-pause", "none", brokers=10, seconds=60.0,
                                        rate=2000.0, seed=1).share_over_20ms


def test_client_pauses_hold_sends_and_answers_for_every_policy():
    plain = simulate("client-pause", "none", brokers=10, seconds=30.0, rate=1000.0, seed=2)
    calm = simulate("healthy", "none", brokers=10, seconds=30.0, rate=1000.0, seed=2)
    assert plain.share_over_20ms > 0.01 > calm.share_over_20ms  # 5-50 ms pauses, ~11 %


def test_policies_count_the_isolations_they_make():
    clock = type("C", (), {"now": 0.0, "__call__": lambda self: self.now})()
    rocket = RocketMQFaultStrategy(4, clock, 1)
    rocket.end(2, None, 0.6, True)  # 600 ms: unavailable for 30 s
    rocket.end(2, None, 0.6, True)  # still unavailable: the same isolation
    assert [rocket.isolations(b) for b in range(4)] == [0, 0, 1, 0]
    breaker = PyBreakerModel(4, clock, 1)
    for _ in range(5):
        breaker.end(1, False, 0.001, False)
    assert [breaker.isolations(b) for b in range(4)] == [0, 1, 0, 0]
