"""Universal Scalability Law (Gunther) fitted to load-test points.

    X(N) = lambda N / (1 + sigma (N - 1) + kappa N (N - 1))

N is concurrency (clients, threads), X throughput. sigma is contention
(serialised fraction), kappa coherency (crosstalk), lambda the throughput of
one unit without either. Throughput peaks at N* = sqrt((1 - sigma) / kappa).
Fitted by bounded non-linear least squares (scipy, trust-region reflective)
on the throughput residuals, started from a linearised fit.
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from capacity.errors import CapacityError

CONCURRENCY_NAMES = ("concurrency", "clients", "threads", "producers", "n")
THROUGHPUT_NAMES = ("throughput", "msgs_per_s", "rate", "tps", "x")


def usl_throughput(n, sigma: float, kappa: float, lam: float):
    n = np.asarray(n, dtype=float)
    return lam * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


@dataclass(frozen=True)
class USLFit:
    sigma: float
    kappa: float
    lam: float
    peak_concurrency: float  # inf when kappa == 0 (no retrograde region)
    max_throughput: float  # X(N*), or the asymptote lambda / sigma when kappa == 0
    rmse: float
    r_squared: float
    mape: float  # mean absolute percentage error of the fit, as a fraction
    points: int

    def throughput(self, n):
        return usl_throughput(n, self.sigma, self.kappa, self.lam)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["lambda"] = d.pop("lam")
        return {k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in d.items()}


def fit_usl(concurrency, throughput) -> USLFit:
    n = np.asarray(concurrency, dtype=float)
    x = np.asarray(throughput, dtype=float)
    if n.shape != x.shape or n.ndim != 1:
        raise CapacityError("concurrency and throughput must be two lists of the same length")
    if len(n) < 3:
        raise CapacityError(f"the USL fit needs at least 3 points, got {len(n)}")
    if not (np.all(np.isfinite(n)) and np.all(np.isfinite(x))):
        raise CapacityError("load-test points must be finite numbers")
    if np.any(n < 1) or np.any(x <= 0):
        raise CapacityError("concurrency must be >= 1 and throughput > 0 in every point")
    if len(np.unique(n)) < 3:
        raise CapacityError("the USL fit needs at least 3 distinct concurrency levels")

    lam0 = float(np.max(x[n == n.min()] / n.min()))
    # Linearised start: N/X * lam - 1 = sigma (N-1) + kappa N (N-1)
    y = n * lam0 / x - 1.0
    a = np.column_stack([n - 1.0, n * (n - 1.0)])
    (s0, k0), *_ = np.linalg.lstsq(a, y, rcond=None)
    start = [min(max(s0, 0.0), 0.99), max(k0, 0.0), lam0]
    scale = float(np.max(x))

    def residuals(p):
        return (usl_throughput(n, *p) - x) / scale

    res = least_squares(
        residuals, start, bounds=([0.0, 0.0, 1e-12], [1.0, np.inf, np.inf]), x_scale="jac",
        xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=10_000,
    )  # fmt: skip
    sigma, kappa, lam = (float(v) for v in res.x)
    n_max = float(n.max())
    if kappa * n_max * (n_max - 1.0) < 1e-6 * (1.0 + sigma * (n_max - 1.0)):
        kappa = 0.0  # solver noise, invisible over the measured range: no retrograde region
    fitted = usl_throughput(n, sigma, kappa, lam)
    err = fitted - x
    ss_tot = float(np.sum((x - x.mean()) ** 2))
    if kappa > 0:
        n_star = math.sqrt(max(1.0 - sigma, 0.0) / kappa)
        x_max = float(usl_throughput(max(n_star, 1.0), sigma, kappa, lam))
    else:
        n_star = math.inf
        x_max = lam / sigma if sigma > 0 else math.inf
    return USLFit(
        sigma=sigma,
        kappa=kappa,
        lam=lam,
        peak_concurrency=n_star,
        max_throughput=x_max,
        rmse=float(np.sqrt(np.mean(err**2))),
        r_squared=1.0 - float(np.sum(err**2)) / ss_tot if ss_tot > 0 else 1.0,
        mape=float(np.mean(np.abs(err) / x)),
        points=len(n),
    )


def read_points(path: str | Path) -> tuple[list[float], list[float]]:
    """Read (concurrency, throughput) from a CSV with a header row.

    Column names accepted: concurrency/clients/threads/producers/n and
    throughput/msgs_per_s/rate/tps/x (case-insensitive), as written by
    `floodgate bench produce` sweeps or by hand.
    """
    path = Path(path)
    try:
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise CapacityError(f"cannot read load-test points {path}: {exc.strerror}") from exc
    if not rows:
        raise CapacityError(f"{path}: no load-test points (want a header and rows)")
    header = {name.strip().lower(): name for name in rows[0] if name}
    n_col = next((header[c] for c in CONCURRENCY_NAMES if c in header), None)
    x_col = next((header[c] for c in THROUGHPUT_NAMES if c in header), None)
    if n_col is None or x_col is None:
        raise CapacityError(
            f"{path}: want columns concurrency,throughput (got {', '.join(header) or 'none'})"
        )
    ns, xs = [], []
    for line_no, row in enumerate(rows, start=2):
        try:
            ns.append(float(row[n_col]))
            xs.append(float(row[x_col]))
        except (TypeError, ValueError):
            raise CapacityError(f"{path}:{line_no}: not a number in {row}") from None
    return ns, xs
