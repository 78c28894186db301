"""Per-minute rollups of the metrics log's latency rows (the ``latency_1m`` table).

A minute row is the exact merge of its seconds' rows: count, sum_us, msgs and
bytes added, bucket counts added per index, min_us and max_us the min and max
over the seconds that timed a call (a second with count 0 has no min or max).
Integers throughout, so the rollup of the log equals the log, to the µs.

Two forms of the one rule: :class:`MinuteRollup` folds row dicts as a writer
produces them (the broker, a second at a time); :func:`rollup_table` does a
whole pyarrow table at once in numpy (the generator, 60,000 rows a chunk).
Spark's form is ``spark_reports.jobs.compact``. Rows that break a quarantine
rule are the writer's to refuse before they get here (``quarantine_reasons``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from heatmap.layout import MAX_INDEX, ZERO_INDEX
from heatmap.metrics_log import LATENCY_SCHEMA, ROLLUP_S

GROUP = ("cluster", "broker", "op")  # with the minute, what a rollup row stands for


def minute_of(ts: datetime) -> datetime:
    """The first second of ``ts``'s UTC minute."""
    epoch = int(ts.timestamp())
    return datetime.fromtimestamp(epoch - epoch % ROLLUP_S, tz=UTC)


class MinuteRollup:
    """Folds ``latency`` row dicts into open minute rows; hands closed minutes over.

    ``add(row)`` merges a second's row into its (minute, cluster, broker, op);
    ``close_before(t)`` returns the rows of minutes that end at or before ``t``
    (a broker calls it as each minute closes) and ``drain()`` all that are open.
    """

    def __init__(self) -> None:
        self._open: dict[tuple, dict[str, Any]] = {}

    def add(self, row: dict[str, Any]) -> None:
        minute = minute_of(row["ts"])
        key = (minute, *(row[k] for k in GROUP))
        acc = self._open.get(key)
        if acc is None:
            self._open[key] = acc = {
                "ts": minute, **{k: row[k] for k in GROUP}, "count": 0, "sum_us": 0,
                "min_us": None, "max_us": None, "buckets": {}, "msgs": 0, "bytes": 0,
            }  # fmt: skip
        for name in ("count", "sum_us", "msgs", "bytes"):
            acc[name] += row[name]
        if row["count"] > 0:
            acc["min_us"] = (
                row["min_us"] if acc["min_us"] is None else min(acc["min_us"], row["min_us"])
            )
            acc["max_us"] = (
                row["max_us"] if acc["max_us"] is None else max(acc["max_us"], row["max_us"])
            )
        buckets = acc["buckets"]
        for index, n in row["buckets"]:
            buckets[index] = buckets.get(index, 0) + n

    def close_before(self, t: datetime) -> list[dict[str, Any]]:
        """Rows of the minutes that end at or before ``t``, in (minute, group) order."""
        done = sorted(k for k in self._open if k[0].timestamp() + ROLLUP_S <= t.timestamp())
        return [_finish(self._open.pop(k)) for k in done]

    def drain(self) -> list[dict[str, Any]]:
        """Every open minute as it stands (at shutdown: a partial minute is still exact)."""
        return [_finish(self._open.pop(k)) for k in sorted(self._open)]

    def __len__(self) -> int:
        return len(self._open)


def _finish(acc: dict[str, Any]) -> dict[str, Any]:
    acc["min_us"] = acc["min_us"] or 0  # as latency_row writes an empty histogram
    acc["max_us"] = acc["max_us"] or 0
    acc["buckets"] = sorted(acc["buckets"].items())
    return acc


def rollup_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The minute rows of some ``latency`` row dicts (all of their minutes)."""
    r = MinuteRollup()
    for row in rows:
        r.add(row)
    return r.drain()


def rollup_table(table: pa.Table) -> pa.Table:
    """The ``latency_1m`` rows of a ``latency`` table (rows of whole minutes, or not).

    Rows come out ordered by (minute, cluster, broker, op), buckets by index.
    Null cluster/broker/op or bucket keys outside [ZERO_INDEX, MAX_INDEX] are
    not expected: quarantine first.
    """
    n = table.num_rows
    if n == 0:
        return LATENCY_SCHEMA.empty_table()
    ts = table.column("ts").cast(pa.int64()).to_numpy()
    minute = ts - ts % (ROLLUP_S * 1_000_000)
    codes, names = [], []
    for col in GROUP:
        enc = pc.dictionary_encode(table.column(col)).combine_chunks()
        # codes ordered like the names, so groups sort by name as well as by code
        order = np.argsort(enc.dictionary.to_numpy(zero_copy_only=False), kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        codes.append(rank[enc.indices.to_numpy()])
        names.append(enc.dictionary.to_numpy(zero_copy_only=False)[order])
    keys = np.stack([minute, *codes], axis=1)
    groups, group_of = np.unique(keys, axis=0, return_inverse=True)
    group_of = group_of.ravel()
    g = len(groups)

    def total(name: str) -> np.ndarray:
        return _sum(group_of, table.column(name).to_numpy(), g)

    count = total("count")
    timed = table.column("count").to_numpy() > 0
    min_us = np.full(g, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(min_us, group_of[timed], table.column("min_us").to_numpy()[timed])
    max_us = np.zeros(g, dtype=np.int64)
    np.maximum.at(max_us, group_of[timed], table.column("max_us").to_numpy()[timed])
    min_us[count == 0] = 0

    buckets = table.column("buckets").combine_chunks()
    offsets = buckets.offsets.to_numpy()
    entry_row = np.repeat(np.arange(n), np.diff(offsets))
    entries = slice(offsets[0], offsets[-1])
    bkeys = buckets.values.field(0).to_numpy()[entries].astype(np.int64)
    bvals = buckets.values.field(1).to_numpy()[entries]
    width = MAX_INDEX - ZERO_INDEX + 1
    cell = group_of[entry_row] * width + (bkeys - ZERO_INDEX)
    cells, cell_of = np.unique(cell, return_inverse=True)
    cell_counts = _sum(cell_of.ravel(), bvals, len(cells))
    cell_group = cells // width
    out_offsets = np.searchsorted(cell_group, np.arange(g + 1)).astype(np.int32)

    return pa.table(
        {
            "ts": pa.array(groups[:, 0], pa.int64()).cast(LATENCY_SCHEMA.field("ts").type),
            **{
                col: pa.array(names[i][groups[:, i + 1]], pa.string())
                for i, col in enumerate(GROUP)
            },
            "count": count,
            "sum_us": total("sum_us"),
            "min_us": min_us,
            "max_us": max_us,
            "buckets": pa.MapArray.from_arrays(
                pa.array(out_offsets),
                pa.array((cells % width + ZERO_INDEX).astype(np.int32)),
                pa.array(cell_counts),
            ),
            "msgs": total("msgs"),
            "bytes": total("bytes"),
        },
        schema=LATENCY_SCHEMA,
    )


def _sum(group_of: np.ndarray, values: np.ndarray, g: int) -> np.ndarray:
    """Exact int64 sums per group (np.bincount would go through float64)."""
    out = np.zeros(g, dtype=np.int64)
    np.add.at(out, group_of, values.astype(np.int64))
    return out
