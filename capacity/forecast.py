"""The Double-11 forecast: a band from yearly history, not a point.

History is (year, messages on the day). The growth rate g is the slope of a
least-squares line through log(messages) against year. From the last
observed year Y0 with volume V0, the forecast for year Y is

    V(Y) = V0 * exp(g * sum_{k=1..Y-Y0} phi^k)

- high: phi = 1, the log-linear trend (constant yearly growth);
- mid:  phi = 0.75, damped growth;
- low:  phi = 0.5, strongly damped growth (Gardner & McKenzie's damped trend
  with the damping applied to the log growth).

Growth on this scale always slows (4x a year cannot last), so the low and
mid curves damp it; the band is the honest uncertainty.

How far the history carries: a trend fitted on a history spanning N years
(first to last year) is extrapolated at most N years past its last year, the
rule of thumb of not forecasting further than the data reaches back. Past
that year (`supported_until`) the band grows no more: the forecast for a
later year is the band at the bound, and says so (`bounded`), rather than
compounding x3.6 a year for 11 years into 10^18 messages a day.

Back-test on the shipped history (the RocketMQ design talk's figures): fitted
on 2012-2015 the band for 2016 is 1.31 T .. 2.65 T and the actual 1.4 T lies
inside (tests pin it). The peak second is the daily mean rate times the
peak-to-mean ratio measured in the per-second metrics log.
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from capacity.errors import CapacityError

PHI_LOW = 0.5
PHI_MID = 0.75
PHI_HIGH = 1.0
SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class HistoryPoint:
    year: int
    messages: float
    source: str = ""


def seed_history_path() -> Path:
    return Path(str(resources.files("capacity.data") / "double11_history.csv"))


def read_history(path: str | Path | None = None) -> list[HistoryPoint]:
    """Read year,messages[,source] rows (default: the talk's figures shipped as data)."""
    path = Path(path) if path is not None else seed_history_path()
    try:
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise CapacityError(f"cannot read history {path}: {exc.strerror}") from exc
    if not rows or not {"year", "messages"} <= set(rows[0]):
        raise CapacityError(f"{path}: want a header with year,messages[,source]")
    points = []
    for line_no, row in enumerate(rows, start=2):
        try:
            year = int(row["year"])
            messages = float(row["messages"])
        except (TypeError, ValueError):
            raise CapacityError(f"{path}:{line_no}: year and messages must be numbers") from None
        points.append(HistoryPoint(year, messages, (row.get("source") or "").strip()))
    return validate_history(points)


def validate_history(points: list[HistoryPoint]) -> list[HistoryPoint]:
    points = sorted(points, key=lambda p: p.year)
    if len(points) < 2:
        raise CapacityError(f"the forecast needs at least 2 years of history, got {len(points)}")
    years = [p.year for p in points]
    if len(set(years)) != len(years):
        raise CapacityError(f"history has a year twice: {years}")
    bad = [p.year for p in points if not (math.isfinite(p.messages) and p.messages > 0)]
    if bad:
        raise CapacityError(f"history messages must be > 0 (years {bad})")
    return points


def growth_rate(points: list[HistoryPoint]) -> tuple[float, float]:
    """(g, residual std) of the least-squares line log(messages) ~ year."""
    years = np.array([p.year for p in points], dtype=float)
    logs = np.log([p.messages for p in points])
    slope, intercept = np.polyfit(years, logs, 1)
    resid = logs - (slope * years + intercept)
    dof = max(len(points) - 2, 1)
    return float(slope), float(np.sqrt(np.sum(resid**2) / dof))


def damped_multiplier(g: float, steps: int, phi: float) -> float:
    """exp(g * (phi + phi^2 + ... + phi^steps))."""
    if steps <= 0:
        return 1.0
    total = steps if phi == 1.0 else phi * (1 - phi**steps) / (1 - phi)
    return math.exp(g * total)


@dataclass(frozen=True)
class Forecast:
    year: int
    low: float
    mid: float
    high: float
    growth_per_year: float  # multiplier, e.g. 4.07 = x4.07 a year
    last_year: int
    last_messages: float
    horizon_years: int  # year - last_year
    residual_log_std: float
    fitted_years: list[int]
    supported_until: int = 0  # the last year the history supports (see supported_until)
    growth_years: int = 0  # the years of growth the band holds: min(horizon, supported)

    @property
    def bounded(self) -> bool:
        """The year lies past what the history supports: the band stops at the bound."""
        return self.year > self.supported_until

    def bound_text(self) -> str:
        """One line naming the bound (empty when the year is within it)."""
        if not self.bounded:
            return ""
        first, span = self.fitted_years[0], self.supported_until - self.last_year
        return (f"{self.year} is {self.horizon_years} years past the history's last year "
                f"({self.last_year}); a trend fitted on {first}-{self.last_year} is extrapolated "
                f"at most its own {span} year(s): the band stops growing at {self.supported_until}")

    def to_dict(self) -> dict:
        return {**asdict(self), "bounded": self.bounded}

    def peak_rate(self, peak_to_mean: float) -> dict[str, float]:
        """Peak msgs/s of the band: daily mean rate x peak-to-mean ratio."""
        if not (math.isfinite(peak_to_mean) and peak_to_mean >= 1):
            raise CapacityError(f"peak-to-mean ratio must be >= 1, got {peak_to_mean}")
        scale = peak_to_mean / SECONDS_PER_DAY
        return {"low": self.low * scale, "mid": self.mid * scale, "high": self.high * scale}


def supported_until(points: list[HistoryPoint]) -> int:
    """The last year a trend fitted on `points` is extrapolated to: as many years past
    the last as the history spans (2012-2016 supports forecasts to 2020)."""
    years = [p.year for p in points]
    return max(years) + (max(years) - min(years))


def forecast(
    points: list[HistoryPoint], year: int, phi_low: float = PHI_LOW, phi_mid: float = PHI_MID
) -> Forecast:
    """Band of the day's message volume in `year` (low <= mid <= high)."""
    points = validate_history(list(points))
    if not (0 < phi_low <= phi_mid <= PHI_HIGH):
        raise CapacityError(f"want 0 < phi_low <= phi_mid <= 1, got {phi_low}, {phi_mid}")
    last = points[-1]
    if year < last.year:
        raise CapacityError(f"year {year} is before the last year of history ({last.year})")
    g, resid = growth_rate(points)
    if g <= 0:
        # shrinking history: the damped curves would sit above the trend; keep the level flat
        g = 0.0
    steps = year - last.year
    until = supported_until(points)
    growth_years = min(steps, until - last.year)  # past the bound the band grows no more
    band = [last.messages * damped_multiplier(g, growth_years, phi)
            for phi in (phi_low, phi_mid, PHI_HIGH)]
    return Forecast(
        year=year,
        low=band[0],
        mid=band[1],
        high=band[2],
        growth_per_year=math.exp(g),
        last_year=last.year,
        last_messages=last.messages,
        horizon_years=steps,
        residual_log_std=resid,
        fitted_years=[p.year for p in points],
        supported_until=until,
        growth_years=growth_years,
    )


def observed_volume(points: list[HistoryPoint], year: int) -> float:
    """Volume in a year inside the history: observed, or log-linear between neighbours."""
    points = validate_history(list(points))
    years = [p.year for p in points]
    if not years[0] <= year <= years[-1]:
        raise CapacityError(f"year {year} is outside the history ({years[0]}..{years[-1]})")
    return float(np.exp(np.interp(year, years, np.log([p.messages for p in points]))))


def growth_band(points: list[HistoryPoint], from_year: int, to_year: int) -> dict[str, float]:
    """Growth multipliers (low/mid/high) from one year to a later one.

    Used to scale a cluster's measured peak to a target date: the band at
    `to_year` over the volume at `from_year` (observed when inside the
    history, else the same curve's forecast), curve by curve.
    """
    if to_year < from_year:
        raise CapacityError(f"target year {to_year} is before the measured year {from_year}")
    last = max(p.year for p in points)
    curves = ("low", "mid", "high")

    def band(year: int) -> dict[str, float]:
        if year <= last:
            v = observed_volume(points, year)
            return dict.fromkeys(curves, v)
        f = forecast(points, year)
        return {k: getattr(f, k) for k in curves}

    a, b = band(from_year), band(to_year)
    return {k: b[k] / a[k] for k in curves}
