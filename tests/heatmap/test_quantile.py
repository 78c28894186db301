import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from heatmap import LatencyHistogram
from heatmap.quantile import grouped_quantile, quantile_rank

latencies = st.lists(st.floats(min_value=1e-7, max_value=30.0), max_size=60)


def as_groups(hists: list[LatencyHistogram]):
    """The layout grouped_quantile takes: entries per group in bucket order."""
    bucket, n, first, count, lo, hi = [], [], [], [], [], []
    for h in hists:
        first.append(len(bucket))
        for idx, c in h.buckets.items():
            bucket.append(idx)
            n.append(c)
        count.append(h.count)
        lo.append(h.min if h.count else 0.0)
        hi.append(h.max if h.count else 0.0)
    arr = np.array
    return (arr(count, dtype=np.int64), arr(first, dtype=np.int64), arr(n, dtype=np.int64),
            arr(bucket, dtype=np.int64), arr(lo), arr(hi))


@settings(max_examples=60, deadline=None)
@given(st.lists(latencies, min_size=1, max_size=5),
       st.sampled_from([0.0, 0.5, 0.9, 0.99, 0.999, 1.0]))
def test_many_groups_at_once_agree_with_one_histogram_to_the_float(groups, q):
    hists = []
    for values in groups:
        h = LatencyHistogram()
        h.record_many(values)
        hists.append(h)
    got = grouped_quantile(q, *as_groups(hists))
    for h, g in zip(hists, got, strict=True):
        want = h.quantile(q)
        assert (np.isnan(g) and want is None) or g == want


def test_the_rank_is_at_least_one_and_rounds_up():
    assert quantile_rank(0.0, 10) == 1
    assert quantile_rank(0.99, 100) == 99
    assert quantile_rank(0.991, 100) == 100
