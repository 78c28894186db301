import pytest

from capacity.errors import CapacityError
from capacity.forecast import (
    HistoryPoint,
    forecast,
    growth_band,
    observed_volume,
    read_history,
    seed_history_path,
    supported_until,
)


def test_seed_history_is_shipped_as_data():
    points = read_history()
    assert seed_history_path().name == "double11_history.csv"
    assert {p.year: p.messages for p in points} == {
        2012: 10e9, 2013: 33.2e9, 2015: 650e9, 2016: 1.4e12,
    }  # fmt: skip
    assert all(p.source.startswith("the RocketMQ design talk") for p in points)


def test_band_fitted_on_2012_to_2015_contains_2016():
    history = [p for p in read_history() if p.year <= 2015]
    f = forecast(history, 2016)
    assert f.low <= 1.4e12 <= f.high
    assert f.low < f.mid < f.high
    assert f.low == pytest.approx(1.31e12, rel=0.01) and f.high == pytest.approx(2.65e12, rel=0.01)


def test_forecast_is_monotone_in_year_and_ordered():
    history = read_history()
    bands = [forecast(history, year) for year in range(2016, 2031)]
    for curve in ("low", "mid", "high"):
        values = [getattr(b, curve) for b in bands]
        assert values == sorted(values), curve
    assert all(b.low <= b.mid <= b.high for b in bands)
    assert bands[0].low == bands[0].high == 1.4e12  # the last observed year is itself


def test_users_can_add_years(tmp_path):
    p = tmp_path / "h.csv"
    p.write_text("year,messages\n2016,1.4e12\n2017,2.0e12\n2018,2.6e12\n")
    f = forecast(read_history(p), 2019)
    assert f.fitted_years == [2016, 2017, 2018]
    assert f.low > 2.6e12 and f.growth_per_year < 1.5


def test_peak_rate_and_growth_band():
    f = forecast(read_history(), 2016)
    assert f.peak_rate(4.0)["mid"] == pytest.approx(1.4e12 / 86400 * 4)
    g = growth_band(read_history(), 2019, 2020)  # the last year the history supports
    assert 1.0 <= g["low"] <= g["mid"] <= g["high"]
    assert g["high"] == pytest.approx(forecast(read_history(), 2017).growth_per_year)
    # past the bound the band grows no more: no growth from 2026 to 2027 is supported
    assert growth_band(read_history(), 2026, 2027) == dict.fromkeys(("low", "mid", "high"), 1.0)


def test_a_forecast_past_what_the_history_supports_is_bounded_and_says_so():
    history = read_history()  # 2012-2016: four years, so forecasts to 2020
    assert supported_until(history) == 2020
    within, at, past = forecast(history, 2019), forecast(history, 2020), forecast(history, 2027)
    assert not within.bounded and not at.bounded and within.bound_text() == ""
    assert past.bounded and past.horizon_years == 11 and past.growth_years == 4
    assert (past.low, past.mid, past.high) == (at.low, at.mid, at.high)
    # the 87,722,980,497,286 msgs/s at a 3.9 peak-to-mean was 11 years of x3.6
    assert past.peak_rate(3.9)["high"] < 1.1e10
    assert forecast(history, 2027).to_dict()["bounded"] is True
    text = past.bound_text()
    assert "2027 is 11 years past the history's last year (2016)" in text
    assert "2012-2016" in text and "stops growing at 2020" in text


def test_growth_band_inside_and_across_the_history():
    history = read_history()
    inside = growth_band(history, 2013, 2015)
    assert inside == {k: pytest.approx(650 / 33.2) for k in ("low", "mid", "high")}
    across = growth_band(history, 2015, 2017)
    f = forecast(history, 2017)
    assert across["mid"] == pytest.approx(f.mid / 650e9)
    assert observed_volume(history, 2014) == pytest.approx((33.2e9 * 650e9) ** 0.5)
    with pytest.raises(CapacityError, match="before"):
        growth_band(history, 2017, 2016)


def test_bad_history(tmp_path):
    with pytest.raises(CapacityError, match="at least 2"):
        forecast([HistoryPoint(2015, 1.0)], 2016)
    with pytest.raises(CapacityError, match="twice"):
        forecast([HistoryPoint(2015, 1.0), HistoryPoint(2015, 2.0)], 2016)
    with pytest.raises(CapacityError, match="before"):
        forecast(read_history(), 2010)
    p = tmp_path / "h.csv"
    p.write_text("when,how_many\n2015,1\n")
    with pytest.raises(CapacityError, match="year,messages"):
        read_history(p)
    with pytest.raises(CapacityError, match="cannot read"):
        read_history(tmp_path / "missing.csv")
