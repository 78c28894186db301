import math

import pytest

from capacity.errors import CapacityError
from capacity.reliability import (
    format_percent,
    loss_probability,
    rebuild_hours,
    reliability,
    table,
)

# The Double-11 talk's table: disk MTBF 1,200,000 h, recovery 2 h (1 TB, 75 %, 100 MB/s).
SEED_ROWS = [
    # (cluster, replicas, printed reliability)
    ("1M", 1, "99.27%"),
    ("2M", 1, "99.27%"),
    ("1M1S", 2, "99.9999976%"),
    ("2M2S", 2, "99.9999976%"),
    ("2M2S", 3, "99.999999999987%"),
]


def _printed_decimals(text: str) -> int:
    return len(text.rstrip("%").split(".")[1])


@pytest.mark.parametrize("cluster,replicas,printed", SEED_ROWS)
def test_seed_table_as_printed(cluster, replicas, printed):
    """Rounding stated: 1 and 2 replicas round half up to the printed places;
    the 3-replica row is truncated (cut) at its 12th decimal, as the seed did."""
    r = reliability(replicas, disk_mtbf_hours=1_200_000, recovery_hours=2)
    decimals = _printed_decimals(printed)
    assert format_percent(r, decimals, truncate=replicas == 3) == printed


def test_three_replicas_rounded_differs_in_the_last_printed_digit_only():
    r = reliability(3, recovery_hours=2)
    assert format_percent(r, 12) == "99.999999999988%"
    assert loss_probability(3, recovery_hours=2) == pytest.approx(6 * 8760 * 4 / 1.2e6**3, rel=1e-9)


def test_masters_do_not_change_per_group_reliability_but_do_cluster_wide():
    one, two = table([2], masters=1)[0], table([2], masters=2)[0]
    assert one.reliability == two.reliability  # the seed prints the same for 1M1S and 2M2S
    assert 1 - two.cluster_reliability == pytest.approx(2 * (1 - one.reliability), rel=1e-6)


def test_rebuild_time_from_disk_water_and_bandwidth():
    # 1 TB at 75 % over 100 MB/s: 750,000 MB / 100 MB/s = 7,500 s
    assert rebuild_hours(1, 0.75, 100) == pytest.approx(7500 / 3600)
    assert rebuild_hours(4, 0.5, 200) == pytest.approx(2e6 / 200 / 3600)


def test_more_replicas_and_faster_rebuild_are_more_reliable():
    rs = [reliability(k, recovery_hours=2) for k in (1, 2, 3, 4)]
    assert rs == sorted(rs)
    assert reliability(2, recovery_hours=1) > reliability(2, recovery_hours=2)
    row = table([1])[0]
    assert row.mttdl_years == pytest.approx(1.2e6 / 8760)
    assert not math.isinf(row.mttdl_years)


def test_format_percent():
    assert format_percent(0.5, 2) == "50.00%"
    assert format_percent(0.99995, 4) == "99.9950%"
    assert format_percent(0.999956, 3, truncate=True) == "99.995%"
    assert format_percent(0.999956, 3) == "99.996%"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"replicas": 0},
        {"replicas": 1, "disk_mtbf_hours": 0},
        {"replicas": 1, "recovery_hours": -1},
        {"replicas": 1, "hours": 0},
    ],
)
def test_bad_input(kwargs):
    with pytest.raises(CapacityError):
        reliability(**kwargs)


def test_bad_disk():
    with pytest.raises(CapacityError, match="water"):
        rebuild_hours(1, 1.5, 100)
