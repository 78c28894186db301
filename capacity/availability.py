"""Availability = MTBF / (MTBF + MTTR), and the downtime budget of a target.

The Double-11 talk states the Double-11 goal as availability "~100 %" with MTTR = 1 s:
one failure a day recovered in a second gives (86400 - 1) / 86400 =
99.9988 %, which the seed prints as 99.999 % (three decimals, rounded).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from decimal import Decimal

from capacity.errors import CapacityError

DAY_S = 86_400.0


def availability(mtbf_s: float, mttr_s: float) -> float:
    """Fraction of time up: MTBF / (MTBF + MTTR), both in seconds."""
    if not (math.isfinite(mtbf_s) and math.isfinite(mttr_s)):
        raise CapacityError("MTBF and MTTR must be finite numbers")
    if mtbf_s <= 0:
        raise CapacityError(f"MTBF must be > 0 s, got {mtbf_s}")
    if mttr_s < 0:
        raise CapacityError(f"MTTR must be >= 0 s, got {mttr_s}")
    return mtbf_s / (mtbf_s + mttr_s)


def nines(fraction: float) -> float:
    """Number of nines: 0.999 -> 3.0 (inf for exactly 1)."""
    if not 0 <= fraction <= 1:
        raise CapacityError(f"availability must be within [0, 1], got {fraction}")
    return math.inf if fraction == 1 else -math.log10(1 - fraction)


def downtime_budget_s(target: float, period_s: float = DAY_S) -> float:
    """Seconds of downtime a target availability allows per period."""
    if not 0 < target <= 1:
        raise CapacityError(f"target availability must be within (0, 1], got {target}")
    if period_s <= 0:
        raise CapacityError(f"period must be > 0 s, got {period_s}")
    return complement(target) * period_s


def complement(target: float) -> float:
    """1 - target, in the decimal the target was written in: 1 - 0.99999 is 1e-05, not
    the 1.0000000000065512e-05 of binary floats (a budget of 0.864 s, not 0.86399999)."""
    return float(Decimal(1) - Decimal(repr(target)))


@dataclass(frozen=True)
class AvailabilityReport:
    mtbf_s: float
    mttr_s: float
    availability: float
    nines: float
    downtime_s_per_period: float
    period_s: float
    target: float
    target_met: bool
    budget_s_per_period: float
    max_mttr_s_for_target: float

    def to_dict(self) -> dict:
        return asdict(self)


def assess(
    mtbf_s: float, mttr_s: float, target: float = 0.99999, period_s: float = DAY_S
) -> AvailabilityReport:
    """Availability of (MTBF, MTTR) against a target over a period.

    `max_mttr_s_for_target` is the longest recovery that still meets the
    target at this MTBF: A >= t  <=>  MTTR <= MTBF (1 - t) / t.
    """
    a = availability(mtbf_s, mttr_s)
    budget = downtime_budget_s(target, period_s)
    return AvailabilityReport(
        mtbf_s=mtbf_s,
        mttr_s=mttr_s,
        availability=a,
        nines=nines(a),
        downtime_s_per_period=period_s * mttr_s / (mtbf_s + mttr_s),  # (1 - A) without cancelling
        period_s=period_s,
        target=target,
        # a tolerance of one part in 1e12 so that 99.999 % meets 99.999 %
        target_met=a >= target - 1e-12,
        budget_s_per_period=budget,
        max_mttr_s_for_target=mtbf_s * complement(target) / target,
    )


@dataclass(frozen=True)
class MeasuredRecovery:
    """MTTR as failover drills measured it (`floodgate drill failover --json`)."""

    mttr_s: float  # median failover time (kill -> first ack by the new master)
    drills: int
    failover_s: tuple[float, ...]
    lost: int  # acknowledged messages lost across the drills (0 is the promise)

    def to_dict(self) -> dict:
        return asdict(self)


def read_drills(path: str) -> MeasuredRecovery:
    """The MTTR measured by the drill results in a JSON file: one result, a list, or
    `bench/ha_failover.py --json`'s document (its `drills`)."""
    return mttr_from_drills(drill_docs(path))


def drill_docs(path: str) -> list:
    """The drill results a JSON file holds (one, a list, or a document's `drills`)."""
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except OSError as exc:
        raise CapacityError(f"--from-drill {path}: {exc.strerror or exc}") from None
    except ValueError:
        raise CapacityError(f"--from-drill {path}: not JSON") from None
    if isinstance(doc, dict) and isinstance(doc.get("drills"), list):
        doc = doc["drills"]
    return doc if isinstance(doc, list) else [doc]


def mttr_from_drills(docs: list[dict]) -> MeasuredRecovery:
    """The median failover of drill results (dicts with `failover_s`, `lost`).

    A drill whose group never came back (failover_s null) has no recovery time
    to offer: it is refused, not averaged away.
    """
    if not docs:
        raise CapacityError("no drill results given")
    times = []
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict) or "failover_s" not in doc:
            raise CapacityError(f"drill result #{i + 1} has no failover_s "
                                "(expected `floodgate drill failover --json` output)")
        value = doc["failover_s"]
        if value is None:
            raise CapacityError(f"drill #{i + 1} never saw its group recover: no MTTR to take")
        if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise CapacityError(f"drill #{i + 1}: failover_s must be a number >= 0, got {value!r}")
        times.append(float(value))
    ordered = sorted(times)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    lost = sum(int(d.get("lost", 0) or 0) for d in docs)
    return MeasuredRecovery(median, len(times), tuple(times), lost)
