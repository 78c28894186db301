"""Figures as they are shown: rounded at the edge, to the precision they have.

The models compute in full float precision; the command line, the report page
and the JSON documents round only when they write a figure out:

- a fraction near 1 (reliability, availability) is printed as a percent with
  as many decimals as give its complement (the loss, the downtime) two
  significant figures: 0.9927 -> "99.27 %", 1 - 2.43e-8 -> "99.9999976 %".
  That is the precision of the inputs (a disk MTBF of "1,200,000 h" and a
  "2 h" rebuild have about two), and it is how the Double-11 talk prints its
  reliability table (99.27 %, 99.9999976 %; its third row, 99.999999999987 %,
  is cut where this rounds: ...988);
- a figure in a JSON document keeps DBL_DIG (15) significant digits: the
  16th and 17th that Python's repr writes are the binary representation's
  noise (1122.1000000000001 is 1122.1), not information;
- a forecast, whose band spans a factor of ten, is printed to three
  significant figures.
"""

from __future__ import annotations

import math
from datetime import date

JSON_DIGITS = 15  # DBL_DIG: decimal digits a double holds exactly
COMPLEMENT_DIGITS = 2  # significant figures of (1 - fraction) a percent near 1 shows
MAX_DECIMALS = 15  # past this a percent's complement is below a double's resolution


def percent_near_one(fraction: float, complement: float | None = None,
                     significant: int = COMPLEMENT_DIGITS) -> str:
    """`fraction` as "99.27 %", with the decimals that give `complement` (1 - fraction,
    passed when it was computed without cancellation) `significant` figures."""
    if fraction is None or not math.isfinite(fraction):
        return "-"
    loss = (1.0 - fraction) if complement is None else complement
    loss_pct = max(0.0, loss) * 100.0
    if loss_pct == 0:
        return "100 %"
    decimals = significant - 1 - math.floor(math.log10(loss_pct))
    decimals = min(max(decimals, 0), MAX_DECIMALS)
    scale = 10**decimals
    units = math.floor(loss_pct * scale + 0.5)  # rounds the complement: exact at 1e-13
    whole = 100 * scale - units
    text = f"{whole // scale}.{whole % scale:0{decimals}d}" if decimals else str(whole)
    return f"{text} %"


def significant(value: float, digits: int = 3) -> str:
    """A figure to `digits` significant figures, grouped: 228,459,581 -> "228,000,000",
    0.012345 -> "0.0123"."""
    if value is None or not math.isfinite(value):
        return "-"
    if value == 0:
        return "0"
    rounded = float(f"{value:.{digits}g}")
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(rounded))))
    return f"{rounded:,.{decimals}f}"


def json_ready(value):
    """A JSON-safe copy: floats to JSON_DIGITS significant digits, inf/nan as null,
    dates as ISO strings, tuples as lists, keys as strings."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return float(f"{value:.{JSON_DIGITS}g}") if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, date):
        return value.isoformat()
    return value
