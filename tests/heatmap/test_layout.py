"""The bucket layout: exact boundaries, the vectorized forms, the bulk table."""

import math

import numpy as np
import pytest

from heatmap import (
    MAX_INDEX,
    ZERO_INDEX,
    ZERO_THRESHOLD,
    HeatmapError,
    bucket_index,
    bucket_indices,
    bucket_lower,
    bucket_table,
    bucket_upper,
    bucket_uppers,
)
from heatmap.layout import PER_OCTAVE, octave_uppers


def test_bucket_bounds_are_powers_of_two_eighths():
    assert bucket_upper(0) == 1.0
    assert bucket_upper(8) == 2.0
    assert bucket_upper(-8) == 0.5
    assert bucket_upper(ZERO_INDEX) == ZERO_THRESHOLD == 2.0**-20
    assert math.isclose(bucket_upper(1), 2 ** (1 / 8))
    assert bucket_index(0.020) == math.ceil(math.log2(0.020) * 8)


def test_largest_index_is_two_to_the_sixteen_seconds():
    assert bucket_upper(MAX_INDEX) == 2.0**16
    assert bucket_index(2.0**16) == MAX_INDEX


@pytest.mark.parametrize("i", range(-170, 170))
def test_exact_boundaries_land_in_their_own_bucket(i):
    upper = bucket_upper(i)
    if i < ZERO_INDEX:
        return
    assert bucket_index(upper) == i
    assert bucket_index(math.nextafter(upper, math.inf)) == i + 1
    if i > ZERO_INDEX:
        assert bucket_index(math.nextafter(upper, 0)) == i
        assert bucket_lower(i) < math.nextafter(upper, 0) <= upper


def test_vectorized_index_agrees_with_scalar_on_every_boundary():
    uppers = np.array([bucket_upper(i) for i in range(ZERO_INDEX, 120)])
    values = np.concatenate(
        [uppers, np.nextafter(uppers, np.inf), np.nextafter(uppers, 0), [0.0, 5e-324, 1e300]]
    )
    assert bucket_indices(values).tolist() == [bucket_index(v) for v in values.tolist()]


def test_table_rows_are_the_scalar_bounds_for_every_index():
    index, lower, upper = bucket_table()
    assert index.tolist() == list(range(ZERO_INDEX, MAX_INDEX + 1))
    # The very floats, not close ones: Spark and numpy take bounds from this table.
    assert upper.tolist() == [bucket_upper(i) for i in index.tolist()]
    assert lower.tolist() == [bucket_lower(i) for i in index.tolist()]
    assert lower[0] == 0.0 and upper[0] == ZERO_THRESHOLD
    assert bucket_indices(upper).tolist() == index.tolist()
    assert np.all(lower[1:] == upper[:-1])


def test_octave_scaled_by_powers_of_two_gives_every_bound():
    octave = octave_uppers()
    assert len(octave) == PER_OCTAVE and octave[0] == 1.0
    for i in range(ZERO_INDEX, MAX_INDEX + 1):
        assert octave[i % PER_OCTAVE] * 2.0 ** (i // PER_OCTAVE) == bucket_upper(i)


def test_table_of_a_range_and_vectorized_uppers():
    index, lower, upper = bucket_table(-45, -40)
    assert index.tolist() == [-45, -44, -43, -42, -41, -40]
    assert lower[0] == bucket_upper(-46) and upper[-1] == bucket_upper(-40)
    keys = np.array([-161, -8, 0, 7, 8, 200])
    assert bucket_uppers(keys).tolist() == [bucket_upper(int(k)) for k in keys]
    with pytest.raises(HeatmapError, match="empty"):
        bucket_table(3, 2)


def test_bad_values_and_schemas_raise_heatmap_errors():
    with pytest.raises(HeatmapError, match="latency must be"):
        bucket_index(-1.0)
    with pytest.raises(HeatmapError, match="schema"):
        bucket_upper(0, schema=4)
    assert issubclass(HeatmapError, ValueError)  # callers that caught ValueError still do
