"""Figures rounded at the edge, to the precision they have (capacity.figures)."""

import json

import pytest

from capacity.availability import assess
from capacity.figures import json_ready, percent_near_one, significant
from capacity.reliability import table


def test_a_fraction_near_one_shows_its_complement_to_two_significant_figures():
    # the Double-11 talk's table (2 h rebuild): 99.27 %, 99.9999976 %, and the third row
    # rounded (the talk cut it: ...987)
    rows = table([1, 2, 3], recovery_hours=2)
    shown = [percent_near_one(r.reliability, r.loss_probability) for r in rows]
    assert shown == ["99.27 %", "99.9999976 %", "99.999999999988 %"]
    assert "99.272658028199" not in percent_near_one(0.99272658028199)  # the report
    assert percent_near_one(86399 / 86400) == "99.9988 %"
    assert percent_near_one(1.0) == "100 %" and percent_near_one(0.5) == "50 %"
    assert percent_near_one(float("nan")) == "-"


def test_large_figures_to_three_significant_figures():
    assert significant(87_722_980_497_286) == "87,700,000,000,000"
    assert significant(228_459_581) == "228,000,000"
    assert significant(999.6) == "1,000" and significant(12.3456) == "12.3"
    assert significant(0.012345) == "0.0123" and significant(0) == "0"


def test_json_keeps_the_digits_a_double_holds_and_no_more():
    doc = json_ready({"rate": 1122.1000000000001, "r": 0.999999999999868, "inf": float("inf"),
                      "t": (0.1 + 0.2,), 3: True, "n": None})
    assert json.dumps(doc) == ('{"rate": 1122.1, "r": 0.999999999999868, "inf": null, '
                               '"t": [0.3], "3": true, "n": null}')


def test_availability_budget_and_downtime_without_binary_noise():
    r = assess(86_399, 1)
    assert r.downtime_s_per_period == 1.0  # was 0.9999999999969589: 1 - A cancelled
    # was 0.8639999999960679 (1 - 0.99999 in binary); 1e-5 x 86400 is 0.8640000000000001,
    # the representation's noise, which the JSON edge drops
    assert r.budget_s_per_period == pytest.approx(0.864, rel=1e-15)
    assert json_ready(r.to_dict())["budget_s_per_period"] == 0.864
    assert r.max_mttr_s_for_target == pytest.approx(86_399 * 1e-5 / 0.99999)
