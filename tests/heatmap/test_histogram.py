"""LatencyHistogram: quantiles against numpy, merge and downscale laws."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heatmap import (
    ZERO_INDEX,
    ZERO_THRESHOLD,
    HeatmapError,
    LatencyHistogram,
    bucket_index,
    bucket_lower,
)

# Heavy-tailed latency samples: lognormal bodies with Pareto tails, 1 µs .. 60 s.
samples = st.builds(
    lambda seed, n, sigma: _heavy_tailed(seed, n, sigma),
    st.integers(0, 2**32 - 1),
    st.integers(1, 3000),
    st.floats(0.2, 2.5),
)


def _heavy_tailed(seed: int, n: int, sigma: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    body = rng.lognormal(mean=-7.0, sigma=sigma, size=n)
    tail = rng.pareto(1.2, size=n) * 1e-3
    return np.clip(np.where(rng.random(n) < 0.05, tail, body), 0.0, 60.0)


def _hist(values) -> LatencyHistogram:
    h = LatencyHistogram()
    h.record_many(values)
    return h


def test_zero_bucket_holds_everything_at_or_below_threshold():
    h = LatencyHistogram()
    for v in (0.0, 1e-9, ZERO_THRESHOLD):
        h.record(v)
    h.record(math.nextafter(ZERO_THRESHOLD, 1))
    assert h.buckets == {ZERO_INDEX: 3, ZERO_INDEX + 1: 1}
    assert bucket_lower(ZERO_INDEX) == 0.0


@pytest.mark.parametrize("bad", [-1e-9, float("nan"), float("inf"), -float("inf")])
def test_bad_values_raise_and_record_nothing(bad):
    h = LatencyHistogram()
    h.record(0.001)
    with pytest.raises(HeatmapError, match="latency must be"):
        h.record(bad)
    with pytest.raises(HeatmapError, match="latency must be"):
        h.record_many(np.array([0.002, bad, 0.003]))
    assert h.count == 1 and h.buckets == {bucket_index(0.001): 1}


@settings(max_examples=150, deadline=None)
@given(samples, st.lists(st.floats(0, 1), min_size=1, max_size=8))
def test_quantile_within_one_bucket_above_numpy(values, qs):
    h = _hist(values)
    for q in qs + [0.0, 0.5, 0.99, 0.999, 1.0]:
        exact = float(np.quantile(values, q, method="inverted_cdf"))
        ours = h.quantile(q)
        assert ours >= exact
        assert ours <= exact * 2 ** (1 / 8) * (1 + 1e-12) or exact <= ZERO_THRESHOLD
    assert h.quantile(1.0) == values.max()
    assert h.count == len(values) and math.isclose(h.sum, float(values.sum()))
    assert h.min == values.min() and h.max == values.max()


@settings(max_examples=50, deadline=None)
@given(samples)
def test_record_many_equals_record_one_by_one(values):
    one = LatencyHistogram()
    for v in values.tolist():
        one.record(v)
    many = _hist(values)
    assert one.buckets == many.buckets
    assert one.count == many.count and one.min == many.min and one.max == many.max


@settings(max_examples=60, deadline=None)
@given(samples, samples, samples)
def test_merge_is_associative_and_commutative(a, b, c):
    ha, hb, hc = _hist(a), _hist(b), _hist(c)
    left = (ha + hb) + hc
    right = ha + (hb + hc)
    assert left.buckets == right.buckets == (hc + hb + ha).buckets
    assert left.count == right.count == len(a) + len(b) + len(c)
    assert left.min == right.min and left.max == right.max
    assert left.buckets == _hist(np.concatenate([a, b, c])).buckets
    # merge() mutates and returns self; + leaves both operands alone
    assert ha.count == len(a) and hb.count == len(b)
    assert ha.merge(hb) is ha and ha.count == len(a) + len(b)
    assert hb.count == len(b)


@settings(max_examples=60, deadline=None)
@given(samples, samples, st.integers(-4, 3))
def test_downscale_of_merge_equals_merge_of_downscales(a, b, schema):
    ha, hb = _hist(a), _hist(b)
    assert (ha + hb).downscale(schema) == ha.downscale(schema) + hb.downscale(schema)


@settings(max_examples=60, deadline=None)
@given(samples, st.integers(0, 3))
def test_downscale_matches_direct_recording_at_that_schema(values, schema):
    direct = LatencyHistogram(schema)
    direct.record_many(values)
    assert _hist(values).downscale(schema).buckets == direct.buckets
    for v in values[:20].tolist():
        assert bucket_index(v, schema) in direct.buckets


@settings(max_examples=60, deadline=None)
@given(samples)
def test_dict_round_trip_is_exact_through_json(values):
    h = _hist(values)
    back = LatencyHistogram.from_dict(json.loads(json.dumps(h.to_dict())))
    assert back == h and back.quantile(0.99) == h.quantile(0.99)


def test_empty_histogram_answers_none():
    h = LatencyHistogram()
    assert h.quantile(0.5) is None and h.mean is None and h.min is None
    assert LatencyHistogram.from_dict(h.to_dict()) == h


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"count": 3, "buckets": {"1": 2}, "min": 1, "max": 1}, "count 3 != sum"),
        ({"count": 1, "buckets": {"1": -1}}, "negative"),
        ({"count": 1, "buckets": {"1": 1}}, "min and max"),
        ({"buckets": {"x": 1}}, "bad histogram"),
        ({"schema": 9}, "schema"),
        ({"count": 1, "buckets": {"1": 1}, "min": [], "max": 1}, "bad histogram"),
        ({"buckets": {"1": float("inf")}}, "bad histogram"),
    ],
)
def test_from_dict_names_what_is_wrong(bad, message):
    with pytest.raises(HeatmapError, match=message):
        LatencyHistogram.from_dict(bad)


def test_quantile_rejects_out_of_range():
    with pytest.raises(HeatmapError, match="quantile"):
        _hist([0.001]).quantile(1.5)


def test_merge_refuses_mixed_schemas():
    with pytest.raises(HeatmapError, match="downscale first"):
        LatencyHistogram(3).merge(LatencyHistogram(2))


def test_buffered_record_folds_across_reads_and_batches():
    rng = np.random.default_rng(7)
    values = rng.lognormal(-7, 1.5, LatencyHistogram.FOLD_AT * 2 + 17)
    h = LatencyHistogram()
    for k, v in enumerate(values.tolist()):
        h.record(v)
        if k == 100:
            assert h.count == 101  # a read in the middle sees every value so far
    assert h == _hist(values)
    assert h.sum == pytest.approx(values.sum())
