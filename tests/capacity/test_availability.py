import math

import pytest

from capacity.availability import assess, availability, downtime_budget_s, nines
from capacity.errors import CapacityError


def test_seed_day_with_one_second_to_recover_prints_as_99_999():
    # the Double-11 talk: (60*60*24 - 1) / (60*60*24) = 99.999 % (printed with 3 decimals)
    a = availability(86_400 - 1, 1)
    assert a == pytest.approx(86_399 / 86_400)
    assert f"{a * 100:.3f}" == "99.999"


def test_budget_and_max_mttr_agree():
    r = assess(mtbf_s=1_000_000, mttr_s=5, target=0.99999)
    assert r.budget_s_per_period == pytest.approx(0.864)
    assert r.max_mttr_s_for_target == pytest.approx(1_000_000 * 1e-5 / 0.99999)
    assert r.target_met
    at_edge = assess(mtbf_s=1_000_000, mttr_s=r.max_mttr_s_for_target, target=0.99999)
    assert at_edge.availability == pytest.approx(0.99999, abs=1e-12) and at_edge.target_met


def test_nines():
    assert nines(0.999) == pytest.approx(3.0)
    assert math.isinf(nines(1.0))
    assert downtime_budget_s(0.999, 1000) == pytest.approx(1.0)


@pytest.mark.parametrize("mtbf,mttr", [(0, 1), (-1, 1), (10, -1), (math.inf, 1)])
def test_bad_input(mtbf, mttr):
    with pytest.raises(CapacityError):
        availability(mtbf, mttr)


def test_mttr_from_drills_is_their_median_failover():
    from capacity.availability import mttr_from_drills

    m = mttr_from_drills([{"failover_s": 1.0, "lost": 0}, {"failover_s": 3.0, "lost": 1},
                          {"failover_s": 1.4}])
    assert (m.mttr_s, m.drills, m.lost) == (1.4, 3, 1)
    assert mttr_from_drills([{"failover_s": 1.0}, {"failover_s": 2.0}]).mttr_s == 1.5


@pytest.mark.parametrize("docs", [[], [{"lost": 0}], [{"failover_s": None}],
                                  [{"failover_s": -1}], ["x"]])
def test_mttr_from_drills_refuses_what_measured_nothing(docs):
    from capacity.availability import mttr_from_drills
    from capacity.errors import CapacityError

    with pytest.raises(CapacityError):
        mttr_from_drills(docs)
