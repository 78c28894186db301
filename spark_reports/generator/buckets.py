"""Draw schema-3 histograms for many rows at once, without a per-row loop.

Each row's latency is a mixture: a lognormal body, a lognormal slow tail, and
optionally a spike (a stall or pause) spread evenly in log-latency up to its
worst value. Expected counts go into one dense (rows x WIDTH) matrix of
buckets relative to each row's own base index, Poisson counts are drawn for
the cells worth drawing, and the nonzero cells come out already ordered by
(row, bucket): exactly the offsets/keys/items a Parquet map column wants.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from heatmap.layout import MAX_INDEX, ZERO_INDEX, bucket_indices, bucket_uppers

WIDTH = 128  # buckets per row: 14 octaves above the median, enough for 2 s spikes
BODY_HALF = 14  # body over +-14 buckets (+-1.75 octaves: 3.4 sigma at 0.36) around its median
TAIL_HALF = 10  # +-1.25 octaves: the tail ends at 2.4x its median (keeps quiet brokers < 20 ms)
TAIL_FACTOR = 6.0  # the slow tail's median relative to the body's
TAIL_SIGMA = 0.4
MIN_EXPECTED = 1e-3  # cells expecting fewer calls are not drawn (mass lost < 0.13/row)


@dataclass
class Histograms:
    """Rows of histograms in Parquet map layout plus their exact summaries."""

    offsets: np.ndarray  # (R+1,) int32 into keys/counts
    keys: np.ndarray  # schema-3 indices, int32, ascending within a row
    counts: np.ndarray  # int64, all > 0
    count: np.ndarray  # (R,) int64: sum of the row's counts
    sum_us: np.ndarray
    min_us: np.ndarray
    max_us: np.ndarray


def _bucket_of(seconds: np.ndarray) -> np.ndarray:
    """Schema-3 index of each (positive, finite) latency, exact at the bounds."""
    return bucket_indices(seconds).astype(np.int64)


def _lognormal_cells(median, sigma, base, half, n_cells):
    """Probability per bucket base..base+n_cells-1; the ends absorb the tails."""
    edges = bucket_uppers(base[:, None] + np.arange(n_cells + 1)[None, :] - 1)  # s
    z = (np.log(edges) - np.log(median)[:, None]) / sigma[:, None]
    cdf = ndtr(z)
    cdf[:, 0] = 0.0
    cdf[:, -1] = 1.0
    return np.diff(cdf, axis=1)


def synthesize(
    rng: np.random.Generator,
    calls: np.ndarray,
    median_s: np.ndarray,
    sigma: np.ndarray,
    tail_share: np.ndarray,
    spike_max_s: np.ndarray,
    spike_share: np.ndarray,
    tail_factor: np.ndarray | None = None,
) -> Histograms:
    """One histogram per row; all arguments are 1-D arrays of the same length.

    `tail_factor`: the slow tail's median relative to the body's (TAIL_FACTOR).
    """
    rows = len(calls)
    calls = calls.astype(float)
    spiking = (spike_max_s > 0) & (spike_share > 0)
    spike_calls = np.where(spiking, calls * spike_share, 0.0)
    tail_calls = calls * tail_share
    body_calls = calls - tail_calls - spike_calls

    body_center = _bucket_of(median_s)
    base = body_center - BODY_HALF
    n_body = 2 * BODY_HALF + 1
    expected = np.zeros((rows, WIDTH))
    expected[:, :n_body] = body_calls[:, None] * _lognormal_cells(
        median_s, sigma, base, BODY_HALF, n_body
    )

    tail_median = median_s * (TAIL_FACTOR if tail_factor is None else tail_factor)
    tail_base = _bucket_of(tail_median) - TAIL_HALF
    n_tail = 2 * TAIL_HALF + 1
    tail_p = _lognormal_cells(tail_median, np.full(rows, TAIL_SIGMA), tail_base, TAIL_HALF, n_tail)
    # The tail sits ~16-22 buckets above the body (log2 of a factor 4-6.5), well inside
    # WIDTH, and its cells are distinct within a row: plain fancy-index += is exact.
    cols = tail_base[:, None] - base[:, None] + np.arange(n_tail)[None, :]
    flat = (np.arange(rows)[:, None] * WIDTH + cols).ravel()
    expected.ravel()[flat] += (tail_calls[:, None] * tail_p).ravel()

    _add_spikes(expected, base, median_s, spike_max_s, spike_calls, spiking)

    cells = np.flatnonzero(expected > MIN_EXPECTED)
    drawn = _poisson(rng, expected.ravel()[cells])
    hit = drawn > 0
    cells, drawn = cells[hit], drawn[hit].astype(np.int64)
    row = cells // WIDTH
    keys = np.clip(base[row] + cells % WIDTH, ZERO_INDEX, MAX_INDEX)
    return _summarize(rng, rows, row, keys, drawn)


def _poisson(rng: np.random.Generator, lam: np.ndarray) -> np.ndarray:
    """Poisson draws; above 50 its normal approximation (5x cheaper, error < 1 %)."""
    out = np.empty(len(lam), dtype=np.int64)
    big = lam > 50.0
    out[~big] = rng.poisson(lam[~big])
    lb = lam[big]
    out[big] = np.maximum(np.rint(lb + np.sqrt(lb) * rng.standard_normal(len(lb))), 0)
    return out


def _add_spikes(expected, base, median_s, spike_max_s, spike_calls, spiking) -> None:
    """Spread each spiking row's calls evenly over buckets from 4x median to its max."""
    idx = np.flatnonzero(spiking)
    if not len(idx):
        return
    lo = _bucket_of(median_s[idx] * 4.0)
    hi = np.maximum(_bucket_of(spike_max_s[idx]), lo)
    n = hi - lo + 1
    row = np.repeat(idx, n)
    step = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
    col = np.clip(np.repeat(lo - base[idx], n) + step, 0, WIDTH - 1)
    vals = np.repeat(spike_calls[idx] / n, n)
    np.add.at(expected.ravel(), row * WIDTH + col, vals)


def _summarize(rng, rows, row, keys, counts) -> Histograms:
    lengths = np.bincount(row, minlength=rows)
    offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    count = np.bincount(row, weights=counts, minlength=rows).round().astype(np.int64)
    mid = np.sqrt(bucket_uppers(keys - 1) * bucket_uppers(keys))  # geometric middle
    sum_us = np.bincount(row, weights=counts * mid * 1e6, minlength=rows).round()

    min_us = np.zeros(rows, dtype=np.int64)
    max_us = np.zeros(rows, dtype=np.int64)
    full = lengths > 0
    first = offsets[:-1][full]
    last = offsets[1:][full] - 1
    min_us[full] = _inside_bucket(rng, keys[first])
    max_us[full] = np.maximum(_inside_bucket(rng, keys[last]), min_us[full])
    return Histograms(
        offsets=offsets.astype(np.int32),
        keys=keys.astype(np.int32),
        counts=counts,
        count=count,
        sum_us=sum_us.astype(np.int64),
        min_us=min_us,
        max_us=max_us,
    )


def _inside_bucket(rng, keys: np.ndarray) -> np.ndarray:
    """A value in microseconds drawn inside each bucket (log-uniform)."""
    u = rng.random(len(keys))
    lo, hi = bucket_uppers(keys - 1), bucket_uppers(keys)
    return np.round(lo * (hi / lo) ** u * 1e6).astype(np.int64)
