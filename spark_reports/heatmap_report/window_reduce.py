"""The heatmap pass's merge, run by Spark in its Python workers (``mapInArrow``):
latency rows carrying a quarantine ``reason`` -> one row per (window, broker, op,
reason) with the rows' stats and their histograms merged into two lists.

Why numpy in a worker and not Spark SQL: a row's histogram is a map, and SQL merges
maps only by exploding every bucket entry and hash-aggregating the entries (9.1 M for
20 brokers x 2 h), then sends them back one row per bucket. In Arrow the maps arrive
as two flat arrays (bucket, count) with offsets, which one sort merges. Measured on the
same log, one warm local session (bench/README, issue 31): the SQL pass and its
transfer 6-7 s against 3.3-3.6 s here (20 brokers x 2 h, 10 s windows), 11-12 s
against 3.4-4.5 s (100 brokers x 24 h of minute rows, 5-minute windows).

The rules stay in Spark SQL (the ``reason`` column): quarantine/ is written from the
same expressions. A window's rows may fall in two chunks or partitions: the driver
adds such rows up (heatmap_report.merge), as histograms merge by adding counts.

This module is sent to the workers by value (``ship``): they need numpy and pyarrow,
not floodgate.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ZERO_INDEX, MAX_INDEX = -160, 128  # heatmap.layout's, copied: workers import no floodgate
_SPAN = MAX_INDEX - ZERO_INDEX + 1
CHUNK_ENTRIES = 4_000_000  # bucket entries merged at once (~150 MB of numpy in a worker)
_NO_MIN, _NO_MAX = np.iinfo(np.int64).max, np.iinfo(np.int64).min

INPUT_COLUMNS = ("ts", "broker", "op", "reason", "count", "sum_us", "min_us", "max_us", "buckets")
OUTPUT_SCHEMA = (
    "window_start timestamp, broker string, op string, reason string, s_count bigint, "
    "s_sum_us bigint, s_min_us bigint, s_max_us bigint, rows bigint, first bigint, "
    "last bigint, buckets array<int>, counts array<bigint>"
)
_TS = pa.timestamp("us", tz="UTC")


def ship() -> None:
    """Pickle this module by value into Spark's workers (local, Connect or a cluster's)."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def reduce_rows(
    batches: Iterator[pa.RecordBatch], window_s: int, chunk_entries: int = CHUNK_ENTRIES
) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function: INPUT_COLUMNS batches -> OUTPUT_SCHEMA batches, merged a
    chunk of about ``chunk_entries`` bucket entries at a time (bounded memory)."""
    chunk: list[pa.RecordBatch] = []
    entries = 0
    for batch in batches:
        chunk.append(batch)
        entries += len(batch.column(batch.schema.get_field_index("buckets")).values)
        if entries >= chunk_entries:
            yield from _reduce(pa.Table.from_batches(chunk).combine_chunks(), window_s)
            chunk, entries = [], 0
    if chunk:
        yield from _reduce(pa.Table.from_batches(chunk).combine_chunks(), window_s)


def _reduce(t: pa.Table, window_s: int) -> Iterator[pa.RecordBatch]:
    if t.num_rows == 0:
        return
    good = pc.is_null(t["reason"]).to_numpy(zero_copy_only=False)
    if good.any():
        yield _good_groups(t.filter(pa.array(good)), window_s)
    if not good.all():
        yield _bad_groups(t.filter(pa.array(~good)), window_s)


def _seconds(ts: pa.ChunkedArray) -> np.ndarray:
    """Epoch seconds of a timestamp column without nulls (floor, as unix_seconds)."""
    return pc.cast(ts, pa.int64()).to_numpy() // 1_000_000


def _good_groups(t: pa.Table, window_s: int) -> pa.RecordBatch:
    """Rows that break no rule (no nulls, buckets within the layout) -> merged groups."""
    secs = _seconds(t["ts"])
    win = secs - secs % window_s
    broker = pc.dictionary_encode(t["broker"]).chunk(0)
    op = pc.dictionary_encode(t["op"]).chunk(0)
    nb, no = len(broker.dictionary), len(op.dictionary)
    w0 = int(win.min())
    rowkey = (((win - w0) // window_s) * nb + broker.indices.to_numpy()) * no + op.indices.to_numpy()
    keys, group = np.unique(rowkey, return_inverse=True)
    n_groups = len(keys)

    count = t["count"].to_numpy()
    calls = count > 0
    s_count = np.zeros(n_groups, np.int64)
    np.add.at(s_count, group, count)
    s_sum = np.zeros(n_groups, np.int64)
    np.add.at(s_sum, group, t["sum_us"].to_numpy())
    s_min = np.full(n_groups, _NO_MIN)
    np.minimum.at(s_min, group[calls], t["min_us"].to_numpy()[calls])
    s_max = np.full(n_groups, _NO_MAX)
    np.maximum.at(s_max, group[calls], t["max_us"].to_numpy()[calls])
    first = np.full(n_groups, _NO_MIN)
    np.minimum.at(first, group, secs)
    last = np.full(n_groups, _NO_MAX)
    np.maximum.at(last, group, secs)

    # The maps' entries: one sort by (group, bucket) and a sum per cell.
    maps = t["buckets"].chunk(0)
    offsets = maps.offsets.to_numpy()
    lo, hi = int(offsets[0]), int(offsets[-1])
    owner = np.repeat(group, np.diff(offsets))
    cell = owner * _SPAN + (maps.keys.to_numpy()[lo:hi].astype(np.int64) - ZERO_INDEX)
    order = np.argsort(cell, kind="stable")
    cell = cell[order]
    starts = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]]) if len(cell) else np.zeros(0, int)
    n = np.add.reduceat(maps.items.to_numpy()[lo:hi][order], starts) if len(starts) else cell
    cell = cell[starts]
    list_offsets = pa.array(np.searchsorted(cell // _SPAN, np.arange(n_groups + 1)), pa.int32())
    buckets = pa.array((cell % _SPAN + ZERO_INDEX).astype(np.int32))

    k = keys // no
    return pa.RecordBatch.from_pydict({
        "window_start": pa.array((w0 + k // nb * window_s) * 1_000_000).cast(_TS),
        "broker": broker.dictionary.take(pa.array(k % nb)),
        "op": op.dictionary.take(pa.array(keys % no)),
        "reason": pa.nulls(n_groups, pa.string()),
        "s_count": s_count, "s_sum_us": s_sum,
        "s_min_us": pa.array(s_min, mask=s_min == _NO_MIN),
        "s_max_us": pa.array(s_max, mask=s_max == _NO_MAX),
        "rows": np.bincount(group, minlength=n_groups).astype(np.int64),
        "first": first, "last": last,
        "buckets": pa.ListArray.from_arrays(list_offsets, buckets),
        "counts": pa.ListArray.from_arrays(list_offsets, pa.array(n, pa.int64())),
    })  # fmt: skip


def _bad_groups(t: pa.Table, window_s: int) -> pa.RecordBatch:
    """Quarantined rows -> a count and a time range per (window, broker, op, reason).
    Any key may be null here (a rule is about nulls), so pyarrow groups them."""
    micros = pc.cast(t["ts"], pa.int64())
    missing = pc.is_null(micros).to_numpy(zero_copy_only=False)
    secs = pc.fill_null(micros, 0).to_numpy() // 1_000_000
    keyed = pa.table({
        "window_start": pa.array((secs - secs % window_s) * 1_000_000, mask=missing),
        "broker": t["broker"], "op": t["op"], "reason": t["reason"],
        "t": pa.array(secs, mask=missing),
    })  # fmt: skip
    g = keyed.group_by(["window_start", "broker", "op", "reason"], use_threads=False).aggregate(
        [("t", "min"), ("t", "max"), ([], "count_all")]
    )
    n = g.num_rows
    none = pa.nulls(n, pa.int64())
    return pa.RecordBatch.from_pydict({
        "window_start": pc.cast(g["window_start"], _TS).combine_chunks(),
        "broker": g["broker"].combine_chunks(), "op": g["op"].combine_chunks(),
        "reason": g["reason"].combine_chunks(),
        "s_count": none, "s_sum_us": none, "s_min_us": none, "s_max_us": none,
        "rows": g["count_all"].combine_chunks(),
        "first": g["t_min"].combine_chunks(), "last": g["t_max"].combine_chunks(),
        "buckets": pa.nulls(n, pa.list_(pa.int32())), "counts": pa.nulls(n, pa.list_(pa.int64())),
    })  # fmt: skip
