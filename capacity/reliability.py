"""Replica reliability: the chance that data survives a year of disk failures.

The Double-11 talk ("RocketMQ 多副本高可靠") prints, for disks with an MTBF of
1,200,000 h (Seagate) and a recovery time of 2 h (1 TB disk at a 75 % water
level re-copied at 100 MB/s):

    replicas 1: 99.27 %    replicas 2: 99.9999976 %    replicas 3: 99.999999999987 %

The formula that reproduces it is the classic MTTDL approximation for k
copies with independent exponential disk failures (rate 1/MTBF each) and a
rebuild window R (Patterson, Gibson & Katz 1988, extended to k copies):

    data-loss rate  = k/M * (k-1)R/M * (k-2)R/M * ... * R/M = k! R^(k-1) / M^k
    P(loss in T)    = 1 - exp(-T * k! R^(k-1) / M^k)         (T = 8760 h, a year)
    reliability     = 1 - P(loss in T)

One of the k disks fails (rate k/M); data is lost only if each of the
remaining copies also fails before the previous rebuild ends. It is an
approximation for R << M (here R/M ~ 2e-6), which is the regime of the table.

How the printed digits compare, with R = 2 h as the seed states it:
  k=1: 99.2727 %       -> printed 99.27 % (rounded to 2 decimals, exact match)
  k=2: 99.99999757 %   -> printed 99.9999976 % (rounded to 7 decimals, match)
  k=3: 99.9999999999878 % -> printed 99.999999999987 % (the seed truncates the
       12th decimal; rounding would give ...988). With the unrounded rebuild
       time 7500 s = 2.083 h, k=3 rounds to ...987 but k=2 gives 99.9999975.
The seed's table therefore takes R = 2 h and cuts its last row; tests pin
both facts. `rebuild_hours` derives R from disk size, water level and
bandwidth (decimal units: 1 TB = 10^6 MB).

N masters: each master and its slaves form an independent replica group, so
the per-message reliability is that of one group (the seed prints the same
figure for 1M and 2M), and the chance that no group of N loses data is r^N.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from capacity.errors import CapacityError

HOURS_PER_YEAR = 8760.0
SEED_DISK_MTBF_HOURS = 1_200_000.0
SEED_RECOVERY_HOURS = 2.0


def rebuild_hours(disk_tb: float = 1.0, water: float = 0.75, rebuild_mbps: float = 100.0) -> float:
    """Hours to re-copy a disk: disk_tb * water (TB) over rebuild_mbps (MB/s)."""
    if disk_tb <= 0:
        raise CapacityError(f"disk size must be > 0 TB, got {disk_tb}")
    if not 0 < water <= 1:
        raise CapacityError(f"water level must be within (0, 1], got {water}")
    if rebuild_mbps <= 0:
        raise CapacityError(f"rebuild bandwidth must be > 0 MB/s, got {rebuild_mbps}")
    return disk_tb * water * 1e6 / rebuild_mbps / 3600.0


def loss_rate_per_hour(replicas: int, disk_mtbf_hours: float, recovery_hours: float) -> float:
    """Data-loss events per hour for one group of `replicas` copies: k! R^(k-1) / M^k."""
    if replicas < 1:
        raise CapacityError(f"replicas must be >= 1, got {replicas}")
    if disk_mtbf_hours <= 0:
        raise CapacityError(f"disk MTBF must be > 0 h, got {disk_mtbf_hours}")
    if recovery_hours < 0:
        raise CapacityError(f"recovery time must be >= 0 h, got {recovery_hours}")
    if recovery_hours >= disk_mtbf_hours:
        raise CapacityError("recovery time must be far below the disk MTBF for this model")
    k = replicas
    return math.factorial(k) * recovery_hours ** (k - 1) / disk_mtbf_hours**k


def reliability(
    replicas: int,
    disk_mtbf_hours: float = SEED_DISK_MTBF_HOURS,
    recovery_hours: float = SEED_RECOVERY_HOURS,
    hours: float = HOURS_PER_YEAR,
) -> float:
    """Probability that one replica group loses no data within `hours`."""
    if hours <= 0:
        raise CapacityError(f"time horizon must be > 0 h, got {hours}")
    rate = loss_rate_per_hour(replicas, disk_mtbf_hours, recovery_hours)
    # -expm1 keeps the tiny loss probabilities (1e-13) exact in floating point
    return 1.0 - (-math.expm1(-rate * hours))


def loss_probability(replicas: int, **kwargs) -> float:
    """1 - reliability, computed without cancellation."""
    rate = loss_rate_per_hour(
        replicas,
        kwargs.get("disk_mtbf_hours", SEED_DISK_MTBF_HOURS),
        kwargs.get("recovery_hours", SEED_RECOVERY_HOURS),
    )
    return -math.expm1(-rate * kwargs.get("hours", HOURS_PER_YEAR))


def format_percent(fraction: float, decimals: int, *, truncate: bool = False) -> str:
    """Print a fraction as the seed does: percent with `decimals` places.

    truncate=True cuts instead of rounding (how the seed prints its 3-replica
    row). Works on the loss probability, so 12+ decimals stay exact.
    """
    loss_pct = (1.0 - fraction) * 100.0
    scale = 10**decimals
    if truncate:
        units = math.ceil(round(loss_pct * scale, 6))  # cutting r = ceiling the loss
    else:
        units = math.floor(loss_pct * scale + 0.5)
    whole = 100 * scale - units
    text = f"{whole // scale}.{whole % scale:0{decimals}d}" if decimals else str(whole)
    return text + "%"


@dataclass(frozen=True)
class ReliabilityRow:
    replicas: int
    masters: int
    reliability: float
    loss_probability: float
    cluster_reliability: float
    mttdl_years: float
    recovery_hours: float
    disk_mtbf_hours: float
    horizon_hours: float

    def to_dict(self) -> dict:
        return asdict(self)


def table(
    replicas: list[int],
    masters: int = 1,
    disk_mtbf_hours: float = SEED_DISK_MTBF_HOURS,
    recovery_hours: float = SEED_RECOVERY_HOURS,
    hours: float = HOURS_PER_YEAR,
) -> list[ReliabilityRow]:
    """One row per replica count, for `masters` independent replica groups."""
    if masters < 1:
        raise CapacityError(f"masters must be >= 1, got {masters}")
    if not replicas:
        raise CapacityError("give at least one replica count")
    rows = []
    for k in replicas:
        rate = loss_rate_per_hour(k, disk_mtbf_hours, recovery_hours)
        loss = -math.expm1(-rate * hours)
        cluster_loss = -math.expm1(masters * math.log1p(-loss)) if loss < 1 else 1.0
        rows.append(
            ReliabilityRow(
                replicas=k,
                masters=masters,
                reliability=1.0 - loss,
                loss_probability=loss,
                cluster_reliability=1.0 - cluster_loss,
                mttdl_years=(1.0 / rate) / HOURS_PER_YEAR if rate > 0 else math.inf,
                recovery_hours=recovery_hours,
                disk_mtbf_hours=disk_mtbf_hours,
                horizon_hours=hours,
            )
        )
    return rows
