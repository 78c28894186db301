"""The heatmap job's finish on the driver, in numpy: from the one aggregate Spark
brings back (merged buckets and stats per window, broker, op; quarantined rows
per reason) to the cluster roll-up, the percentiles, the outputs' tables and the
report's figures.

Why here and not in Spark: after the pass over the log, what is left is small
(windows x brokers x ops x the buckets in use: ~2.5 M rows for a day of 100
brokers at 5-minute windows) and each further Spark query cost 1-9 s of fixed
cost on a 2-core machine (planning, code generation, scheduling), where numpy
answers in well under a second. The aggregate is ~100 bytes a row on the driver, so
a big cluster's comes a slice of brokers at a time (heatmap_report.chunked).

The rules are the Spark frames' (spark_reports.heatmap_report.frames) and
heatmap.LatencyHistogram's: merge by adding counts; percentiles by
heatmap.quantile, the one rule (the same floats as a LatencyHistogram's).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from heatmap.layout import MAX_INDEX, ZERO_INDEX, bucket_table
from heatmap.quantile import grouped_quantile
from heatmap.sla import SLA_MAX_S

ALL_BROKERS = "ALL"
QUANTILES = {"p50": 0.5, "p99": 0.99, "p999": 0.999}
_SPAN = MAX_INDEX - ZERO_INDEX + 1  # buckets a key can hold (the rules quarantine the rest)
_NO_MIN = np.iinfo(np.int64).max  # an absent min_us / max_us while reducing
_NO_MAX = np.iinfo(np.int64).min
_, _LOWER, _ = bucket_table()  # lower bound of bucket ZERO_INDEX + i


@dataclass
class Groups:
    """Histograms keyed by group (sorted by key), with their stats.

    Entries: ``group`` (index into the group arrays), ``bucket``, ``n``,
    sorted by (group, bucket). Stats per group: ``count``, ``sum_us``, and
    ``min_us``/``max_us`` (_NO_MIN/_NO_MAX where no row had calls).
    """

    key: np.ndarray
    count: np.ndarray
    sum_us: np.ndarray
    min_us: np.ndarray
    max_us: np.ndarray
    group: np.ndarray
    bucket: np.ndarray
    n: np.ndarray


@dataclass
class Merged:
    """The aggregate on the driver: per (window, broker, op) groups, "ALL" included."""

    window_s: int
    brokers: np.ndarray  # names by code; the last is ALL_BROKERS
    ops: np.ndarray  # names by code
    windows: np.ndarray  # window starts (epoch s) by code
    groups: Groups  # key = (window code * len(brokers) + broker code) * len(ops) + op code
    per_op: dict  # op -> {"rows", "first", "last"} (every row read, quarantined too)
    reasons: dict  # reason -> rows quarantined

    def parts(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(window code, broker code, op code) of group keys."""
        nb, no = len(self.brokers), len(self.ops)
        return key // no // nb, key // no % nb, key % no


def from_arrow(table: pa.Table, window_s: int, tail_s: int = 0) -> Merged:
    """A Merged from frames.window_entries' rows (as Arrow). ``tail_s``: seconds a
    row covers after its ts (59 for minute rows), added to each op's last time."""
    per_op, reasons = overview(table, tail_s)
    good = table.filter(pc.is_null(table["reason"]))
    brokers = pc.unique(good["broker"])
    ops = pc.unique(good["op"])
    b = pc.index_in(good["broker"], value_set=brokers).to_numpy().astype(np.int64)
    o = pc.index_in(good["op"], value_set=ops).to_numpy().astype(np.int64)
    secs = pc.divide(pc.cast(good["window_start"], pa.int64()), 1_000_000).to_numpy()
    t0 = int(secs.min()) if len(secs) else 0
    w = (secs - t0) // window_s  # window codes by arithmetic: no sort
    nb, no = len(brokers) + 1, len(ops)
    # A row's stats, then its buckets as rows of their own (reduce_groups' input).
    owner = pc.list_parent_indices(good["buckets"]).to_numpy()
    entries = len(owner)
    bucket = pc.list_flatten(good["buckets"]).to_numpy().astype(np.int64)
    stats = (np.r_[good["s_count"].to_numpy(), np.zeros(entries, np.int64)],
             np.r_[good["s_sum_us"].to_numpy(), np.zeros(entries, np.int64)],
             np.r_[pc.fill_null(good["s_min_us"], _NO_MIN).to_numpy(), np.full(entries, _NO_MIN)],
             np.r_[pc.fill_null(good["s_max_us"], _NO_MAX).to_numpy(), np.full(entries, _NO_MAX)],
             np.r_[np.full(len(b), ZERO_INDEX - 1), bucket],
             np.r_[np.zeros(len(b), np.int64), pc.list_flatten(good["counts"]).to_numpy()])  # fmt: skip
    w, b, o = (np.r_[x, x[owner]] for x in (w, b, o))
    per_broker = reduce_groups((w * nb + b) * no + o, *stats)
    cluster = reduce_groups((w * nb + (nb - 1)) * no + o, *stats)  # the roll-up: broker "ALL"
    names = np.array([*brokers.to_pylist(), ALL_BROKERS], dtype=object)
    windows = t0 + np.arange(int(w.max()) + 1 if len(w) else 0, dtype=np.int64) * window_s
    return Merged(window_s, names, np.array(ops.to_pylist(), dtype=object), windows,
                  _concat(per_broker, cluster), per_op, reasons)  # fmt: skip


def overview(table: pa.Table, tail_s: int) -> tuple[dict, dict]:
    """Rows and time range per op, quarantined rows per reason, as the job reports
    them. Every row read counts in its op's rows; a row without a time stays out of the
    range (an op none of whose rows has a time: first and last None)."""
    summary = table.group_by(["op", "reason"], use_threads=False).aggregate(
        [("rows", "sum"), ("first", "min"), ("last", "max")]
    )
    per_op, reasons = {}, {}
    for r in summary.to_pylist():
        if r["reason"] is not None:
            reasons[r["reason"]] = reasons.get(r["reason"], 0) + r["rows_sum"]
        op = r["op"] if r["op"] is not None else "(null)"
        seen = per_op.setdefault(op, {"rows": 0, "first": None, "last": None})
        seen["rows"] += r["rows_sum"]
        if r["first_min"] is None:
            continue
        seen["first"] = r["first_min"] if seen["first"] is None else min(seen["first"],
                                                                           r["first_min"])
        seen["last"] = r["last_max"] if seen["last"] is None else max(seen["last"],
                                                                        r["last_max"])
    for seen in per_op.values():
        if seen["first"] is not None:
            seen["first"] = datetime.fromtimestamp(seen["first"], tz=UTC)
            seen["last"] = datetime.fromtimestamp(seen["last"] + tail_s, tz=UTC)
    return per_op, reasons


def reduce_groups(key, count, sum_us, min_us, max_us, bucket, n) -> Groups:
    """Rows of (key, stats, bucket, n) -> Groups: stats summed / min / max per key,
    bucket counts added per (key, bucket). A bucket below ZERO_INDEX marks a row
    without an entry (an empty histogram, or a row's stats alone)."""
    if not len(key):  # every row quarantined, or none of an op
        empty = np.zeros(0, np.int64)
        return Groups(empty, empty, empty, empty, empty, empty, np.zeros(0, np.int32), empty)
    entry = bucket >= ZERO_INDEX
    # One sort by (key, bucket), the rows without an entry first within their key.
    cell = key * (_SPAN + 1) + np.where(entry, bucket - ZERO_INDEX + 1, 0)
    order = np.argsort(cell)
    cell, key, entry = cell[order], key[order], entry[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    count, sum_us = np.add.reduceat(count[order], starts), np.add.reduceat(sum_us[order], starts)
    mn = np.minimum.reduceat(min_us[order], starts)
    mx = np.maximum.reduceat(max_us[order], starts)
    group = np.cumsum(np.r_[False, key[1:] != key[:-1]])  # group index of each row
    firsts = np.flatnonzero(entry & np.r_[True, cell[1:] != cell[:-1]])
    # Between two entries' first rows lie only that cell's rows and the next key's
    # entry-less rows, whose n is 0: reduceat adds each cell's counts.
    summed = np.add.reduceat(n[order], firsts) if len(firsts) else np.zeros(0, np.int64)
    return Groups(key[starts], count, sum_us, mn, mx, group[firsts],
                  (cell[firsts] % (_SPAN + 1) - 1 + ZERO_INDEX).astype(np.int32), summed)  # fmt: skip


def _concat(a: Groups, b: Groups) -> Groups:
    """Two Groups as one (b's groups after a's; keys stay unique across them)."""
    return Groups(*(np.concatenate([x, y]) for x, y in (
        (a.key, b.key), (a.count, b.count), (a.sum_us, b.sum_us), (a.min_us, b.min_us),
        (a.max_us, b.max_us), (a.group, b.group + len(a.key)), (a.bucket, b.bucket), (a.n, b.n),
    )))  # fmt: skip


def percentiles(g: Groups) -> dict[str, np.ndarray]:
    """count, mean, p50, p99, p999, max (seconds; NaN where a group has no calls)."""
    calls = g.count > 0
    first = np.searchsorted(g.group, np.arange(len(g.key)), side="left")
    lo, hi = g.min_us / 1e6, g.max_us / 1e6
    out = {"count": g.count}
    with np.errstate(invalid="ignore", divide="ignore"):
        out["mean"] = np.where(calls, g.sum_us.astype(np.float64) / g.count / 1e6, np.nan)
    for name, q in QUANTILES.items():
        out[name] = grouped_quantile(q, g.count, first, g.n, g.bucket, lo, hi)
    out["max"] = np.where(calls, hi, np.nan)
    return out


def _timestamps(secs: np.ndarray) -> pa.Array:
    return pa.array(secs * 1_000_000, pa.int64()).cast(pa.timestamp("us", tz="UTC"))


def _names(names: np.ndarray, codes: np.ndarray) -> pa.Array:
    """A string column of ``names`` by code, taken in Arrow: a heatmap/ output of ~2 M rows
    spent 0.3 s building a Python string object a row."""
    return pa.array(names, pa.string()).take(pa.array(codes, pa.int64()))


def heatmap_table(m: Merged, brokers: bool = True) -> pa.Table:
    """window_start, broker, op, bucket, count: the heatmap/ output (brokers=False:
    the cluster's rows only)."""
    g = m.groups
    w, b, o = m.parts(g.key[g.group])
    if not brokers:
        keep = b == len(m.brokers) - 1
        g = Groups(g.key, g.count, g.sum_us, g.min_us, g.max_us, g.group[keep], g.bucket[keep],
                   g.n[keep])  # fmt: skip
        w, b, o = w[keep], b[keep], o[keep]
    return pa.table({
        "window_start": _timestamps(m.windows[w]), "broker": _names(m.brokers, b),
        "op": _names(m.ops, o), "bucket": pa.array(g.bucket, pa.int32()),
        "count": pa.array(g.n, pa.int64()),
    })  # fmt: skip


def percentiles_table(m: Merged, pcts: dict) -> pa.Table:
    """window_start, broker, op, count, mean, p50, p99, p999, max: the percentiles/ output."""
    w, b, o = m.parts(m.groups.key)
    cols = {"window_start": _timestamps(m.windows[w]),
            "broker": _names(m.brokers, b), "op": _names(m.ops, o),
            "count": pa.array(pcts["count"], pa.int64())}  # fmt: skip
    for name in ("mean", *QUANTILES, "max"):
        cols[name] = pa.array(pcts[name], pa.float64(), from_pandas=True)  # NaN -> null
    return pa.table(cols)


def _frame(m: Merged, keys: np.ndarray, values: dict) -> pd.DataFrame:
    w, b, _ = m.parts(keys)
    cols = {"t": m.windows[w].astype(np.int64), "broker": m.brokers[b]}
    return pd.DataFrame({**cols, **values})


def report_data(m: Merged, pcts: dict, op: str, draw_s: int, worst_n: int = 4) -> dict:
    """The report's figures for ``op`` from one aggregate (a slice of brokers, or the
    cluster alone: chunked.Finish puts them together)."""
    g = m.groups
    hits = np.flatnonzero(m.ops == op)
    w, b, o = m.parts(g.key)
    in_op = (o == hits[0]) if len(hits) else np.zeros(len(g.key), bool)
    is_all = b == len(m.brokers) - 1
    spike = in_op & ~is_all & (np.nan_to_num(pcts["max"], nan=-1.0) > SLA_MAX_S)

    # Whole range per broker (and ALL): merged histograms, percentiles, calls over 20 ms.
    idx = np.flatnonzero(in_op)
    e = np.flatnonzero(in_op[g.group])
    whole = reduce_groups(
        np.concatenate([b[idx], b[g.group[e]]]),
        np.r_[g.count[idx], np.zeros(len(e), np.int64)],
        np.r_[g.sum_us[idx], np.zeros(len(e), np.int64)],
        np.r_[g.min_us[idx], np.full(len(e), _NO_MIN)],
        np.r_[g.max_us[idx], np.full(len(e), _NO_MAX)],
        np.r_[np.full(len(idx), ZERO_INDEX - 1), g.bucket[e]].astype(np.int64),
        np.r_[np.zeros(len(idx), np.int64), g.n[e]],
    )  # fmt: skip
    rank = percentiles(whole)
    over = np.zeros(len(whole.key), np.int64)
    np.add.at(over, whole.group, np.where(_LOWER[whole.bucket - ZERO_INDEX] >= SLA_MAX_S, whole.n, 0))
    names = m.brokers[whole.key]
    ranking = pd.DataFrame({"broker": names, "op": op, **rank, "over_20ms": over})
    # Per broker: windows over 20 ms, and the worst window (of equal maxima the earliest).
    sw = pd.DataFrame({"broker": m.brokers[b[in_op & ~is_all]],
                       "t": m.windows[w[in_op & ~is_all]].astype(np.int64),
                       "max": pcts["max"][in_op & ~is_all],
                       "spike": spike[in_op & ~is_all].astype(np.int64)})  # fmt: skip
    worst_t = (sw.assign(neg_t=-sw["t"]).sort_values(["max", "neg_t"], na_position="first")
               .groupby("broker")["t"].last())  # fmt: skip
    per = pd.DataFrame({"spike_windows": sw.groupby("broker")["spike"].sum(), "worst_t": worst_t})
    ranking = ranking.join(per, on="broker")
    ranking["spike_windows"] = ranking["spike_windows"].fillna(0).astype(np.int64)

    worst = worst_brokers(ranking, worst_n)
    wanted = [ALL_BROKERS, *worst]
    shown = in_op & (is_all | spike)
    windows = _frame(m, g.key[shown], {k: pcts[k][shown] for k in
                                       ("count", "mean", "p50", "p99", "p999", "max")})  # fmt: skip
    curves = windows[windows["broker"] == ALL_BROKERS].sort_values("t").drop(columns="broker")
    spikes = windows[windows["broker"] != ALL_BROKERS].sort_values(
        ["t", "max"], ascending=[True, False]
    )
    drawn = np.isin(m.brokers, wanted)
    e = np.flatnonzero(in_op[g.group] & drawn[b[g.group]])
    t = m.windows[w[g.group[e]]].astype(np.int64)
    cells = (
        pd.DataFrame({"t": t - t % draw_s, "broker": m.brokers[b[g.group[e]]],
                      "bucket": g.bucket[e], "count": g.n[e]})
        .groupby(["t", "broker", "bucket"], as_index=False, sort=False)["count"].sum()
    )  # fmt: skip
    return {
        "cells": cells,
        "cells_window_s": draw_s,
        "curves": curves.reset_index(drop=True),
        "spikes": spikes.reset_index(drop=True),
        **summary(ranking, worst_n),
    }


def worst_spikes(spikes: pd.DataFrame, n: int) -> pd.DataFrame:
    """The ``n`` worst of spike windows (t, broker, max): the highest max, then the
    earliest, then by broker name."""
    return spikes.sort_values(["max", "t", "broker"], ascending=[False, True, True]).head(n)


def spike_windows(table: pa.Table, op: str) -> pd.DataFrame:
    """t, broker, max of every broker's windows of ``op`` over the SLA's max, straight from
    the pass's rows (report_data finds the same windows after the whole finish)."""
    good = table.filter(pc.and_(pc.is_null(table["reason"]), pc.equal(table["op"], op)))
    per = good.group_by(["window_start", "broker"], use_threads=False).aggregate(
        [("s_max_us", "max")]
    )
    worst = pc.fill_null(per["s_max_us_max"], -1).to_numpy() / 1e6
    spike = worst > SLA_MAX_S
    t = pc.divide(pc.cast(per["window_start"], pa.int64()), 1_000_000).to_numpy()
    return pd.DataFrame({"t": t[spike], "broker": per["broker"].to_numpy(zero_copy_only=False)[spike],
                         "max": worst[spike]})  # fmt: skip


def worst_brokers(ranking: pd.DataFrame, worst_n: int) -> list[str]:
    """The brokers drawn one by one: the highest p999, then max."""
    brokers = ranking[ranking["broker"] != ALL_BROKERS]
    order = brokers.sort_values(["p999", "max", "broker"], ascending=[False, False, True])
    return order.head(worst_n)["broker"].tolist()


def summary(ranking: pd.DataFrame, worst_n: int) -> dict:
    """The verdict's figures from the ranking (brokers and ALL): the worst window, the
    spike windows and brokers, the calls over 20 ms."""
    brokers = ranking[ranking["broker"] != ALL_BROKERS]
    timed = brokers.dropna(subset=["max"])
    top = timed.sort_values(["max", "worst_t", "broker"], ascending=[False, True, True]).head(1)
    worst_window = (
        {"t": int(top.iloc[0]["worst_t"]), "broker": top.iloc[0]["broker"],
         "max": float(top.iloc[0]["max"])}
        if len(top) else None
    )  # fmt: skip
    return {
        "worst_brokers": worst_brokers(ranking, worst_n),
        "ranking": ranking,
        "spike_total": int(brokers["spike_windows"].sum()),
        "worst_window": worst_window,
        "spike_brokers": int((brokers["spike_windows"] > 0).sum()),
        "brokers": len(brokers),
        "calls_over": int(ranking.loc[ranking["broker"] == ALL_BROKERS, "over_20ms"].sum()),
    }
