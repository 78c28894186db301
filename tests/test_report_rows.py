"""The comparison the report tests use: floats to 1e-9, everything else exactly."""

from tests.report_rows import differences


def test_floats_within_1e9_are_the_same_report_and_nothing_else_is_forgiven():
    a = {"rows": [{"count": 35528, "mean": 0.000314530032650304, "broker": "b2"}], "p": None}
    assert differences(a, {"rows": [{"count": 35528, "mean": 0.0003145300326416838,
                                     "broker": "b2"}], "p": None}) == []
    assert differences(a, {"rows": [{"count": 35529, "mean": 0.000314530032650304,
                                     "broker": "b2"}], "p": None}) == [".rows[0].count: 35528 != 35529"]
    assert differences(a, {"rows": [{"count": 35528, "mean": 0.0003146, "broker": "b2"}],
                           "p": None}) == [".rows[0].mean: 0.000314530032650304 != 0.0003146"]
    assert differences(a, {"rows": [], "p": None}) == [".rows: 1 items != 0"]
    assert differences(a, {"rows": a["rows"]}) == [": keys ['p', 'rows'] != ['rows']"]
    assert differences(float("nan"), float("nan")) == []
