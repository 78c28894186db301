"""The heatmap job's finish on the driver (heatmap_report.merge), without Spark: the
pass's rows are made by the very function Spark's workers run (window_reduce), and
every figure is checked against heatmap.LatencyHistogram fed the same calls."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from heatmap import SLA_MAX_S, ZERO_INDEX, LatencyHistogram, bucket_index
from spark_reports.heatmap_report import merge
from spark_reports.heatmap_report.window_reduce import reduce_rows
from tests.spark_reports.heatmap_report.entry_rows import INPUT, T0

EPOCH0 = int(T0.timestamp())


def row(broker: str, second: int, latencies_us: list[int], op: str = "send",
        reason: str | None = None) -> dict:
    """A metrics-log row of calls taking `latencies_us` (whole µs, so µs / 1e6 is the
    very float the histogram records)."""
    buckets: dict[int, int] = {}
    for us in latencies_us:
        k = bucket_index(us / 1e6)
        buckets[k] = buckets.get(k, 0) + 1
    return {"ts": T0 + timedelta(seconds=second), "broker": broker, "op": op, "reason": reason,
            "count": len(latencies_us), "sum_us": sum(latencies_us),
            "min_us": min(latencies_us, default=0), "max_us": max(latencies_us, default=0),
            "buckets": buckets, "calls": latencies_us}


def pass_rows(rows: list[dict], window_s: int, chunk_entries: int = 4_000_000) -> pa.Table:
    """frames.window_entries' rows for `rows`, as Spark's workers make them."""
    table = pa.Table.from_pylist(
        [{k: (list(v.items()) if k == "buckets" else v) for k, v in r.items() if k != "calls"}
         for r in rows], schema=INPUT)  # fmt: skip
    out = list(reduce_rows(iter(table.to_batches(max_chunksize=5)), window_s,
                           chunk_entries=chunk_entries))  # fmt: skip
    return pa.Table.from_batches(out)


def histograms(rows: list[dict], window_s: int) -> dict:
    """(window start, broker or ALL, op) -> the LatencyHistogram of its good rows' calls."""
    out: dict = defaultdict(LatencyHistogram)
    for r in rows:
        if r["reason"] is not None:
            continue
        secs = int(r["ts"].timestamp())
        start = datetime.fromtimestamp(secs - secs % window_s, tz=UTC)
        for broker in (r["broker"], merge.ALL_BROKERS):
            h = out[(start, broker, r["op"])]
            for us in r["calls"]:
                h.record(us / 1e6)
    return dict(out)


def random_rows(seed: int) -> list[dict]:
    rnd = random.Random(seed)
    rows = []
    for _ in range(300):
        # two stretches with two empty minutes between them
        second = rnd.choice([rnd.randrange(0, 60), rnd.randrange(180, 240)])
        calls = [rnd.choice([rnd.randrange(0, 2), rnd.randrange(100, 3000),
                             rnd.randrange(15_000, 90_000)]) for _ in range(rnd.randrange(0, 6))]
        rows.append(row(rnd.choice(["b1", "b2", "b3"]), second, calls,
                        op=rnd.choice(["send", "pull"])))
    rows.append(row("b4", 5, []))  # a broker with no calls at all in its window
    return rows


def test_each_window_broker_and_op_is_the_histogram_of_its_calls_and_all_adds_brokers_up():
    rows = random_rows(seed=5)
    want = histograms(rows, 60)
    # tiny chunks: a group's pieces come in several of the pass's rows and add up
    table = pass_rows(rows, 60, chunk_entries=25)
    assert table.num_rows > len({(w, b, o) for w, b, o in want if b != merge.ALL_BROKERS})
    m = merge.from_arrow(table, 60)
    pcts = merge.percentiles(m.groups)
    got = {(r["window_start"], r["broker"], r["op"]): r
           for r in merge.percentiles_table(m, pcts).to_pylist()}
    assert set(got) == set(want)
    for key, h in want.items():
        r = got[key]
        assert r["count"] == h.count, key
        if not h.count:  # no calls: no figures, not zeros
            assert r["mean"] is r["p50"] is r["p99"] is r["p999"] is r["max"] is None
            continue
        # the one percentile rule: the same floats as the histogram's
        assert (r["p50"], r["p99"], r["p999"], r["max"]) == (
            h.quantile(0.5), h.quantile(0.99), h.quantile(0.999), h.max), key
        assert r["mean"] == pytest.approx(h.mean)
    heat = {(r["window_start"], r["broker"], r["op"], r["bucket"]): r["count"]
            for r in merge.heatmap_table(m).to_pylist()}
    assert heat == {(*key, b): c for key, h in want.items() for b, c in h.buckets.items()}
    assert got[(T0, "b4", "send")]["count"] == 0


def test_windows_are_numbered_from_the_first_with_empty_ones_kept_and_keys_decode():
    rows = [row("b1", 10, [500]), row("b2", 200, [700], op="pull")]
    m = merge.from_arrow(pass_rows(rows, 60), 60)
    # minutes 1 and 2 had no rows: still windows (codes by arithmetic, not by sort)
    assert m.windows.tolist() == [EPOCH0 + 60 * i for i in range(4)]
    assert m.brokers.tolist() == ["b1", "b2", merge.ALL_BROKERS]  # ALL is always last
    assert sorted(m.ops.tolist()) == ["pull", "send"]
    w, b, o = m.parts(m.groups.key)
    cells = sorted((int(m.windows[i]), m.brokers[j], m.ops[k]) for i, j, k in zip(w, b, o, strict=True))
    assert cells == sorted([(EPOCH0, "b1", "send"), (EPOCH0, "ALL", "send"),
                            (EPOCH0 + 180, "b2", "pull"), (EPOCH0 + 180, "ALL", "pull")])
    cluster = merge.heatmap_table(m, brokers=False).to_pylist()
    assert {r["broker"] for r in cluster} == {merge.ALL_BROKERS} and len(cluster) == 2
    assert merge.heatmap_table(m).num_rows == 4


def test_quarantined_rows_are_counted_by_reason_and_in_their_ops_range_not_merged():
    rows = [row("b1", 10, [500, 600]), row("b1", 70, [800]),
            row("b2", 5, [900_000], reason="count_mismatch"),
            row("b2", 300, [1], reason="count_mismatch"),
            row("b3", 20, [50], op="sendd", reason="unknown_op")]
    nameless = dict(row("b1", 30, [5], reason="null_field"), broker=None, op=None)
    m = merge.from_arrow(pass_rows([*rows, nameless], 60), 60, tail_s=59)
    assert m.reasons == {"count_mismatch": 2, "unknown_op": 1, "null_field": 1}
    send = m.per_op["send"]
    assert send["rows"] == 4  # every row read, the quarantined ones too
    assert send["first"] == T0 + timedelta(seconds=5)
    assert send["last"] == T0 + timedelta(seconds=300 + 59)  # a minute row covers 59 s more
    assert send["first"].tzinfo is not None
    assert m.per_op["sendd"]["rows"] == 1 and m.per_op["(null)"]["rows"] == 1
    # the 900 ms call of a quarantined row is in no figure
    pcts = merge.percentiles(m.groups)
    got = {(r["broker"], r["window_start"]): r for r in merge.percentiles_table(m, pcts).to_pylist()}
    assert set(got) == {("b1", T0), ("ALL", T0), ("b1", T0 + timedelta(minutes=1)),
                        ("ALL", T0 + timedelta(minutes=1))}
    assert got[("ALL", T0)]["max"] == 600 / 1e6 and got[("ALL", T0)]["count"] == 2


def test_a_group_of_rows_that_all_lack_a_time_stays_out_of_the_range():
    rows = [row("b1", 100, [500]), dict(row("b1", 0, [5], reason="null_field"), ts=None)]
    per_op, reasons = merge.overview(pass_rows(rows, 60), tail_s=0)
    assert reasons == {"null_field": 1}
    assert per_op["send"]["first"] == per_op["send"]["last"] == T0 + timedelta(seconds=100)
    assert per_op["send"]["rows"] == 2  # counted all the same: every row read


def test_an_op_none_of_whose_rows_has_a_time_is_counted_without_a_range():
    rows = [row("b1", 100, [500]), dict(row("b1", 0, [5], reason="null_field"), ts=None,
                                        op="pull")]
    per_op, _reasons = merge.overview(pass_rows(rows, 60), tail_s=0)
    assert per_op["pull"] == {"rows": 1, "first": None, "last": None}
    assert per_op["send"]["rows"] == 1


def test_every_row_quarantined_gives_empty_tables_and_a_report_without_a_worst_window():
    rows = [row("b1", 1, [500], reason="count_mismatch")]
    m = merge.from_arrow(pass_rows(rows, 10), 10)
    assert m.brokers.tolist() == [merge.ALL_BROKERS] and len(m.windows) == 0
    pcts = merge.percentiles(m.groups)
    assert merge.heatmap_table(m).num_rows == merge.percentiles_table(m, pcts).num_rows == 0
    data = merge.report_data(m, pcts, "send", 10)
    assert data["worst_window"] is None and data["brokers"] == 0 and data["spike_total"] == 0
    assert data["cells"].empty and data["curves"].empty and data["worst_brokers"] == []


def test_reduce_groups_sums_stats_per_key_and_counts_per_key_and_bucket():
    none = ZERO_INDEX - 1  # a row of stats alone, no bucket entry
    key = np.array([7, 3, 7, 7, 3, 7, 9])
    count = np.array([2, 1, 0, 0, 0, 1, 0])
    sum_us = np.array([30, 5, 0, 0, 0, 8, 0])
    min_us = np.array([10, 5, merge._NO_MIN, merge._NO_MIN, merge._NO_MIN, 8, merge._NO_MIN])
    max_us = np.array([20, 5, merge._NO_MAX, merge._NO_MAX, merge._NO_MAX, 8, merge._NO_MAX])
    bucket = np.array([none, none, -40, -50, -60, none, none])
    n = np.array([0, 0, 2, 1, 1, 0, 0])
    g = merge.reduce_groups(key, count, sum_us, min_us, max_us, bucket, n)
    assert g.key.tolist() == [3, 7, 9]  # sorted by key
    assert g.count.tolist() == [1, 3, 0] and g.sum_us.tolist() == [5, 38, 0]
    assert g.min_us.tolist() == [5, 8, merge._NO_MIN] and g.max_us.tolist() == [5, 20, merge._NO_MAX]
    # entries sorted by (group, bucket); key 9 has none
    assert list(zip(g.group.tolist(), g.bucket.tolist(), g.n.tolist(), strict=True)) == [
        (0, -60, 1), (1, -50, 1), (1, -40, 2)]
    empty = merge.reduce_groups(*(np.zeros(0, np.int64) for _ in range(7)))
    assert len(empty.key) == len(empty.n) == 0


def test_a_bucket_written_twice_in_a_window_adds_up():
    rows = [row("b1", 1, [700, 700]), row("b1", 2, [700])]
    m = merge.from_arrow(pass_rows(rows, 10), 10)
    heat = {(r["broker"], r["bucket"]): r["count"] for r in merge.heatmap_table(m).to_pylist()}
    assert heat == {("b1", bucket_index(700e-6)): 3, ("ALL", bucket_index(700e-6)): 3}


# --- the report's figures ---------------------------------------------------------

def spiky_rows() -> list[dict]:
    """Four brokers over three 10 s windows of send (and a pull the report ignores):
    b1 25 ms at 0 s and at 20 s (equal maxima), b2 exactly 20 ms (no spike), b3 90 ms
    at 10 s, b4 fast; a 200 ms pull on b4."""
    return [row("b1", 1, [25_000, 300]), row("b1", 12, [400]), row("b1", 21, [25_000]),
            row("b2", 3, [20_000, 500]), row("b2", 15, [600]),
            row("b3", 14, [90_000, 700, 800]), row("b3", 25, [21_000]),
            row("b4", 2, [100, 150]), row("b4", 22, [200]),
            row("b4", 5, [200_000], op="pull")]


def test_report_data_ranks_brokers_and_finds_spike_windows_over_the_sla():
    rows = spiky_rows()
    m = merge.from_arrow(pass_rows(rows, 10), 10)
    data = merge.report_data(m, merge.percentiles(m.groups), "send", draw_s=20, worst_n=2)
    ranking = data["ranking"].set_index("broker")
    whole = defaultdict(LatencyHistogram)
    for r in rows:
        if r["op"] == "send":
            for b in (r["broker"], merge.ALL_BROKERS):
                for us in r["calls"]:
                    whole[b].record(us / 1e6)
    assert set(ranking.index) == set(whole) and set(ranking["op"]) == {"send"}
    for b, h in whole.items():
        assert ranking.loc[b, "count"] == h.count
        assert (ranking.loc[b, "p999"], ranking.loc[b, "max"]) == (h.quantile(0.999), h.max)
        assert ranking.loc[b, "over_20ms"] == h.count_above(SLA_MAX_S)  # 20 ms itself is not
    # windows whose max is over 20 ms: b1 twice, b3 twice (21 ms), b2's 20 ms is none
    assert ranking["spike_windows"].to_dict() == {"b1": 2, "b2": 0, "b3": 2, "b4": 0, "ALL": 0}
    assert (data["spike_total"], data["spike_brokers"], data["brokers"]) == (4, 2, 4)
    assert data["calls_over"] == whole[merge.ALL_BROKERS].count_above(SLA_MAX_S) == 4
    assert data["worst_window"] == {"t": EPOCH0 + 10, "broker": "b3", "max": 0.09}
    assert ranking.loc["b1", "worst_t"] == EPOCH0  # of equal maxima, the earliest
    assert data["worst_brokers"] == ["b3", "b1"]  # p999, then max
    spikes = data["spikes"]
    assert spikes[["t", "broker"]].values.tolist() == [
        [EPOCH0, "b1"], [EPOCH0 + 10, "b3"], [EPOCH0 + 20, "b1"], [EPOCH0 + 20, "b3"]]
    assert spikes.loc[2:, "max"].tolist() == [0.025, 0.021]  # within a window: worst first
    curves = data["curves"]
    assert curves["t"].tolist() == [EPOCH0, EPOCH0 + 10, EPOCH0 + 20] and "broker" not in curves
    assert curves["max"].tolist() == [0.025, 0.09, 0.025]


def test_report_data_draws_all_and_the_worst_brokers_only_in_coarser_windows():
    rows = spiky_rows()
    m = merge.from_arrow(pass_rows(rows, 10), 10)
    data = merge.report_data(m, merge.percentiles(m.groups), "send", draw_s=20, worst_n=2)
    cells = data["cells"]
    assert data["cells_window_s"] == 20
    assert set(cells["broker"]) == {merge.ALL_BROKERS, "b3", "b1"}  # not b2 or b4
    assert set(cells["t"]) == {EPOCH0, EPOCH0 + 20}  # 10 s windows drawn two by two
    b1 = cells[cells["broker"] == "b1"].groupby("t")["count"].sum().to_dict()
    assert b1 == {EPOCH0: 3, EPOCH0 + 20: 1}
    assert cells[cells["broker"] == merge.ALL_BROKERS]["count"].sum() == 14


def test_report_data_of_an_op_not_in_the_aggregate_is_empty():
    m = merge.from_arrow(pass_rows(spiky_rows(), 10), 10)
    data = merge.report_data(m, merge.percentiles(m.groups), "ack", 10)
    assert data["worst_window"] is None and data["spike_total"] == 0 and data["cells"].empty
    assert data["ranking"].empty and data["worst_brokers"] == []


def test_spike_windows_come_straight_from_the_pass_rows_of_one_op():
    rows = [*spiky_rows(), row("b2", 8, [95_000], reason="count_mismatch")]
    table = pass_rows(rows, 10, chunk_entries=3)  # a window's max may come in pieces
    early = merge.spike_windows(table, "send").sort_values(["t", "broker"])
    assert early.values.tolist() == [[EPOCH0, "b1", 0.025], [EPOCH0 + 10, "b3", 0.09],
                                     [EPOCH0 + 20, "b1", 0.025], [EPOCH0 + 20, "b3", 0.021]]
    pulls = merge.spike_windows(table, "pull")
    assert pulls.values.tolist() == [[EPOCH0, "b4", 0.2]]


def test_worst_spikes_are_the_highest_then_the_earliest_then_by_name():
    spikes = pd.DataFrame({"t": [30, 10, 20, 10, 40], "broker": ["b2", "b9", "b1", "b1", "b3"],
                           "max": [0.5, 0.5, 0.5, 0.5, 0.03]})
    assert merge.worst_spikes(spikes, 3)[["t", "broker"]].values.tolist() == [
        [10, "b1"], [10, "b9"], [20, "b1"]]
    assert len(merge.worst_spikes(spikes, 10)) == 5


def test_worst_brokers_skip_all_and_break_ties_by_max_then_name():
    ranking = pd.DataFrame({"broker": ["ALL", "b2", "b1", "b3", "b4"],
                            "p999": [9.0, 0.5, 0.5, 0.5, math.nan],
                            "max": [9.0, 0.7, 0.7, 0.9, math.nan]})
    assert merge.worst_brokers(ranking, 3) == ["b3", "b1", "b2"]
    assert merge.worst_brokers(ranking, 10)[-1] == "b4"  # no calls: last


def test_percentiles_of_a_group_without_calls_are_nan():
    rows = [row("b1", 1, []), row("b1", 2, [])]
    m = merge.from_arrow(pass_rows(rows, 10), 10)
    pcts = merge.percentiles(m.groups)
    assert pcts["count"].tolist() == [0, 0]
    for name in ("mean", "p50", "p99", "p999", "max"):
        assert np.isnan(pcts[name]).all(), name
