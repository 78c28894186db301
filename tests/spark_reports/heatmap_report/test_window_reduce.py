"""The heatmap pass's merge as Spark's workers run it (Arrow batches in, groups out),
against the rule written out row by row in Python."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import pyarrow as pa

from spark_reports.heatmap_report.window_reduce import ZERO_INDEX, reduce_rows
from tests.spark_reports.heatmap_report.entry_rows import INPUT, T0


def make_rows(seed: int, n: int = 400) -> list[dict]:
    rnd = random.Random(seed)
    rows = []
    for _ in range(n):
        ts = T0 + timedelta(seconds=rnd.randrange(0, 120), microseconds=rnd.randrange(10**6))
        row = dict(ts=ts, broker=rnd.choice(["b1", "b2", "b3"]), op=rnd.choice(["send", "pull"]),
                   reason=None, buckets={})  # fmt: skip
        for _ in range(rnd.randrange(0, 6)):
            row["buckets"][rnd.randrange(ZERO_INDEX, ZERO_INDEX + 200)] = rnd.randrange(1, 50)
        row["count"] = sum(row["buckets"].values())
        row["sum_us"] = row["count"] * rnd.randrange(100, 900)
        row["min_us"], row["max_us"] = (rnd.randrange(50, 100), rnd.randrange(900, 5000)) if row[
            "count"] else (0, 0)  # fmt: skip
        if rnd.random() < 0.1:  # quarantined: any key may be null then
            row["reason"] = rnd.choice(["null_field", "count_mismatch"])
            for key in ("ts", "broker", "op"):
                if rnd.random() < 0.3:
                    row[key] = None
        rows.append(row)
    return rows


def batches(rows: list[dict], size: int) -> list[pa.RecordBatch]:
    table = pa.Table.from_pylist(
        [dict(r, buckets=list(r["buckets"].items())) for r in rows], schema=INPUT
    )
    return table.to_batches(max_chunksize=size)


def window_of(ts, window_s):
    if ts is None:
        return None
    secs = int(ts.timestamp() // 1)
    return datetime.fromtimestamp(secs - secs % window_s, tz=UTC)


def expected(rows: list[dict], window_s: int) -> dict:
    out = defaultdict(lambda: dict(s_count=0, s_sum_us=0, s_min_us=None, s_max_us=None, rows=0,
                                   first=None, last=None, buckets=Counter()))  # fmt: skip
    for r in rows:
        g = out[(window_of(r["ts"], window_s), r["broker"], r["op"], r["reason"])]
        g["rows"] += 1
        if r["ts"] is not None:
            t = int(r["ts"].timestamp() // 1)
            g["first"] = t if g["first"] is None else min(g["first"], t)
            g["last"] = t if g["last"] is None else max(g["last"], t)
        if r["reason"] is not None:
            continue
        g["s_count"] += r["count"]
        g["s_sum_us"] += r["sum_us"]
        if r["count"]:
            g["s_min_us"] = min(r["min_us"], g["s_min_us"] or r["min_us"])
            g["s_max_us"] = max(r["max_us"], g["s_max_us"] or r["max_us"])
        g["buckets"].update(r["buckets"])
    for (_, _, _, reason), g in out.items():
        if reason is not None:
            g.update(s_count=None, s_sum_us=None)
        g["buckets"] = {k: v for k, v in g["buckets"].items() if v}
    return dict(out)


def merged(out: list[pa.RecordBatch]) -> dict:
    """The workers' rows with a group's pieces (from different chunks) added up."""
    got: dict = {}
    for r in pa.Table.from_batches(out).to_pylist():
        key = (r["window_start"], r["broker"], r["op"], r["reason"])
        g = got.setdefault(key, dict(s_count=None, s_sum_us=None, s_min_us=None, s_max_us=None,
                                     rows=0, first=None, last=None, buckets=Counter()))  # fmt: skip
        for name, pick in (("s_count", sum), ("s_sum_us", sum), ("s_min_us", min),
                           ("s_max_us", max), ("first", min), ("last", max)):  # fmt: skip
            values = [v for v in (g[name], r[name]) if v is not None]
            g[name] = pick(values) if values else None
        g["rows"] += r["rows"]
        g["buckets"].update(dict(zip(r["buckets"] or [], r["counts"] or [], strict=True)))
    for g in got.values():
        g["buckets"] = dict(g["buckets"])
    return got


def test_groups_equal_the_row_by_row_rule_in_one_chunk_and_in_many():
    rows = make_rows(seed=7)
    for window_s in (1, 10, 60):
        want = expected(rows, window_s)
        whole = list(reduce_rows(iter(batches(rows, 64)), window_s))
        assert merged(whole) == want
        # Tiny chunks: groups split across them, the pieces add up to the same.
        pieces = list(reduce_rows(iter(batches(rows, 7)), window_s, chunk_entries=20))
        assert len(pa.Table.from_batches(pieces)) > len(pa.Table.from_batches(whole))
        assert merged(pieces) == want


def test_a_chunk_of_quarantined_rows_only_and_no_rows_at_all():
    rows = [r for r in make_rows(seed=3) if r["reason"] is not None]
    assert merged(list(reduce_rows(iter(batches(rows, 5)), 10))) == expected(rows, 10)
    assert list(reduce_rows(iter([]), 10)) == []


def test_the_workers_layout_is_the_histograms():
    """The module copies the bucket layout's bounds (workers import no floodgate)."""
    from heatmap import layout
    from spark_reports.heatmap_report import window_reduce

    assert (window_reduce.ZERO_INDEX, window_reduce.MAX_INDEX) == (layout.ZERO_INDEX, layout.MAX_INDEX)
