"""The load generator's recent summary (a producer's /stats `load`)."""

from __future__ import annotations

import time

import pytest

from broker_core.client.loadgen import LoadGenerator, LoadSpec
from broker_core.client.producer import Producer, SendFailed
from heatmap import LatencyHistogram


def test_the_recent_summary_counts_the_window_only_and_its_latencies():
    with Producer({"b1": "127.0.0.1:9"}, fuse=False) as producer:
        gen = LoadGenerator(producer, LoadSpec(duration=60, rate=1000))
        gen.started = time.time() - 30
        old = LatencyHistogram()
        old.record(5.0)
        gen.seconds.append([int(time.time()) - 20, old, 0, 1])  # before the window: left out
        for rt in (0.001, 0.002, 0.003):
            gen._record(rt, 1, None)
        gen._record(0.004, 1, SendFailed("b1: refused"))
        s = gen.recent_summary(10.0)
    assert (s["sends"], s["errors"], s["totals"]["acked"], s["totals"]["errors"]) == (4, 1, 3, 1)
    assert 9 < s["window_s"] <= 10 and s["target_rate"] == 1000
    assert s["rate"] == pytest.approx(4 / s["window_s"])
    assert s["p50_s"] == pytest.approx(0.002, rel=0.1) and s["max_s"] == pytest.approx(0.004)
