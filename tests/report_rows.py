"""Reports compared across runs: integers, strings and times exactly, floats to 1e-9.

Why not floats exactly: on the project's VMs, numpy's vector division in a report's
driver process now and then came out wrong in one lane of four, about 1e-11 relative
(1 heatmap in 40 of the same log: 11,174,623 us / 35,528 calls gave 314.53003264168376
where the same expression a line later, and Python, gave 314.530032650304; two more
elements of the same array, at lane 2 too, were off likewise). A bare process dividing
arrays 5 million times (two at once, preempting each other) never did: the fault is the
host's, not ours to fix, and a mean off in the 11th digit is not a different report.
Everything a report counts is an integer and stays exact.
"""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow.parquet as pq

REL = 1e-9


def rows(path: Path, keys: tuple[str, ...]) -> list[dict]:
    """A Parquet folder's rows, sorted by `keys` (as text: nulls sort too)."""
    return sorted(pq.read_table(path).to_pylist(), key=lambda r: tuple(str(r[k]) for k in keys))


def differences(a, b, where: str = "") -> list[str]:
    """Where `a` and `b` (rows, dicts, lists, scalars) differ, each as `path: a != b`."""
    if isinstance(a, float) and isinstance(b, float):
        same = math.isclose(a, b, rel_tol=REL) or (math.isnan(a) and math.isnan(b))
        return [] if same else [f"{where}: {a!r} != {b!r}"]
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys {sorted(a)} != {sorted(b)}"]
        return [d for k in a for d in differences(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]
