"""Pure pieces of the heatmap job: windows, the percentile rule on hand-built rows."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from heatmap import LatencyHistogram, bucket_upper
from spark_reports.errors import ReportError


def test_parse_window_accepts_units_and_rejects_nonsense():
    from spark_reports.heatmap_report.frames import parse_window

    assert [parse_window(t) for t in ("1s", "10s", "1m", "5m", "1h", "90")] == [
        1,
        10,
        60,
        300,
        3600,
        90,
    ]
    for bad in ("", "0s", "5x", "-1m", "2d", "100000"):
        with pytest.raises(ReportError, match="--window"):
            parse_window(bad)


def test_default_window_grows_with_the_range_from_1s_to_10min():
    from spark_reports.heatmap_report.frames import choose_window_s

    assert choose_window_s(600) == 1
    assert choose_window_s(3600) == 5
    assert choose_window_s(6 * 3600) == 30
    assert choose_window_s(24 * 3600) == 300
    assert choose_window_s(30 * 24 * 3600) == 600


def rows():
    t0 = datetime(2026, 11, 11, 0, 0, tzinfo=UTC)
    base = dict(ts=t0, cluster="c", op="send", msgs=1, bytes=1)
    return [
        # zero bucket and clamping to max: p50 is 2**-20 s, p99 is max (0.95 ms < bucket bound)
        dict(base, broker="b1", count=4, sum_us=950, min_us=0, max_us=950,
             buckets={-160: 3, -80: 1}),
        dict(base, broker="b1", ts=t0.replace(second=10), count=2, sum_us=5000, min_us=2000,
             max_us=3000, buckets={-70: 1, -66: 1}),
        # no calls in this second: counted as a window with count 0, no percentiles
        dict(base, broker="b2", ts=t0.replace(second=30), count=0, sum_us=0, min_us=0, max_us=0,
             buckets={}),
    ]  # fmt: skip


def test_percentile_rule_on_hand_built_rows(spark):
    """Spark's pass (window_entries) and the driver's finish (merge) on rows whose
    answer heatmap.LatencyHistogram gives."""
    from spark_reports import schema
    from spark_reports.heatmap_report import frames as hf
    from spark_reports.heatmap_report import merge

    df = schema.with_quarantine_reason(spark.createDataFrame(rows(), schema.spark_schema()))
    merged = merge.from_arrow(hf.window_entries(df, 60).toArrow(), 60)
    pcts = merge.percentiles(merged.groups)
    got = {r["broker"]: r for r in merge.percentiles_table(merged, pcts).to_pylist()}
    assert set(got) == {"b1", "b2", "ALL"}
    h = LatencyHistogram.from_dict(
        {
            "count": 6,
            "sum": 0.00595,
            "min": 0.0,
            "max": 0.003,
            "buckets": {-160: 3, -80: 1, -70: 1, -66: 1},
        }
    )
    for broker in ("b1", "ALL"):
        r = got[broker]
        assert r["count"] == 6
        assert (r["p50"], r["p99"], r["p999"], r["max"]) == (
            h.quantile(0.5),
            h.quantile(0.99),
            h.quantile(0.999),
            0.003,
        )
        assert r["mean"] == pytest.approx(0.00595 / 6)
    assert got["ALL"]["p50"] == bucket_upper(-160) == 2**-20  # rank 3 of 6: the zero bucket
    assert got["b2"]["count"] == 0 and got["b2"]["p50"] is None and got["b2"]["mean"] is None
    heat = {(r["broker"], r["bucket"]): r["count"] for r in merge.heatmap_table(merged).to_pylist()}
    assert heat == {("b1", -160): 3, ("b1", -80): 1, ("b1", -70): 1, ("b1", -66): 1,
                    ("ALL", -160): 3, ("ALL", -80): 1, ("ALL", -70): 1, ("ALL", -66): 1}  # fmt: skip
    assert merged.per_op["send"]["rows"] == 3 and merged.reasons == {}


def test_quarantined_rows_are_counted_not_merged(spark):
    from spark_reports import schema
    from spark_reports.heatmap_report import frames as hf
    from spark_reports.heatmap_report import merge

    bad = dict(rows()[0], count=5)  # count != sum(buckets)
    df = spark.createDataFrame([*rows(), bad], schema.spark_schema())
    merged = merge.from_arrow(hf.window_entries(schema.with_quarantine_reason(df), 60).toArrow(), 60)
    assert merged.reasons == {schema.COUNT_MISMATCH: 1}
    assert merged.per_op["send"]["rows"] == 4  # every row read, as the report says
    calls = {r["broker"]: r["count"] for r in merge.percentiles_table(
        merged, merge.percentiles(merged.groups)).to_pylist()}  # fmt: skip
    assert calls == {"b1": 6, "b2": 0, "ALL": 6}


def test_every_row_quarantined_leaves_empty_tables_and_a_report_with_no_data(spark):
    from spark_reports import schema
    from spark_reports.heatmap_report import frames as hf
    from spark_reports.heatmap_report import merge

    bad = [dict(r, op="sendd") for r in rows()]
    df = spark.createDataFrame(bad, schema.spark_schema())
    merged = merge.from_arrow(hf.window_entries(schema.with_quarantine_reason(df), 60).toArrow(), 60)
    assert merged.reasons == {schema.UNKNOWN_OP: 3} and merged.per_op["sendd"]["rows"] == 3
    pcts = merge.percentiles(merged.groups)
    assert merge.heatmap_table(merged).num_rows == merge.percentiles_table(merged, pcts).num_rows == 0
    data = merge.report_data(merged, pcts, "sendd", 60)
    assert data["worst_window"] is None and data["brokers"] == 0 and data["cells"].empty


def test_slices_keep_the_drivers_share_of_the_aggregate_near_its_budget():
    from spark_reports.heatmap_report.chunked import BUCKETS_PER_GROUP, SLICE_ROWS, slices_for

    assert slices_for(20, 720, 2) == 1  # 1.15 M rows: one action, as before
    assert slices_for(100, 288, 2) == 1  # a 100-broker day: 2.3 M rows
    # 1,000 brokers over a day of 5-minute windows: ~23 M rows in 8 slices of ~3 M
    assert slices_for(1000, 288, 2) == -(-1000 * 288 * 2 * BUCKETS_PER_GROUP // SLICE_ROWS) == 8
    assert slices_for(3, 10**6, 2) == 3  # never more slices than brokers
    assert slices_for(0, 0, 0) == 1


def test_spike_windows_from_the_pass_are_the_finishs_spike_windows(spark):
    """The drill-downs start from merge.spike_windows on the pass's rows, before the
    finish: the same windows and maxima as report_data's, on both sides of 20 ms."""
    from heatmap.layout import bucket_index
    from spark_reports import schema
    from spark_reports.heatmap_report import frames as hf
    from spark_reports.heatmap_report import merge

    t0 = datetime(2026, 11, 11, 0, 0, tzinfo=UTC)
    base = dict(cluster="c", op="send", msgs=1, bytes=1, count=1, min_us=100)

    def row(broker, second, max_us, op="send"):
        return dict(base, broker=broker, op=op, ts=t0.replace(second=second), sum_us=max_us,
                    max_us=max_us, buckets={bucket_index(max_us / 1e6): 1})  # fmt: skip

    data = [row("b1", 5, 25_000), row("b1", 6, 1_000), row("b2", 5, 20_000),  # 20 ms: no spike
            row("b2", 40, 21_000), row("b3", 7, 90_000, op="pull"), row("b3", 8, 15_000)]  # fmt: skip
    df = schema.with_quarantine_reason(spark.createDataFrame(data, schema.spark_schema()))
    table = hf.window_entries(df, 30).toArrow()
    m = merge.from_arrow(table, 30)
    finish = merge.report_data(m, merge.percentiles(m.groups), "send", 30)["spikes"]
    early = merge.spike_windows(table, "send")
    key = ["t", "broker"]
    assert early.sort_values(key)[["t", "broker", "max"]].values.tolist() == \
        finish.sort_values(key)[["t", "broker", "max"]].values.tolist()  # fmt: skip
    t = int(t0.timestamp())
    assert sorted(early[["broker", "t"]].values.tolist()) == [["b1", t], ["b2", t + 30]]


def test_drill_cells_are_the_windows_seconds_summed_per_bucket(spark):
    """The drill-downs' read: only the named brokers' windows, good rows only, and a second
    written twice (a broker's restart rewrites its minute) adds up bucket by bucket."""
    from spark_reports import schema
    from spark_reports.heatmap_report.collect import drill_cells

    again = rows()[1]  # b1's second 10, written a second time
    bad = dict(rows()[0], ts=rows()[0]["ts"].replace(second=20), count=5)  # count != buckets
    other_op = dict(rows()[0], op="pull")
    df = spark.createDataFrame([*rows(), again, bad, other_op], schema.spark_schema())
    t0 = int(rows()[0]["ts"].timestamp())
    cells = drill_cells(df, [("b1", t0)], 60, "send")
    got = {(int(r.t) - t0, r.broker, int(r.bucket)): int(r.count) for r in cells.itertuples()}
    assert got == {(0, "b1", -160): 3, (0, "b1", -80): 1, (10, "b1", -70): 2, (10, "b1", -66): 2}
    assert list(cells.columns) == ["t", "broker", "bucket", "count"]
    assert drill_cells(df, [("b9", t0)], 60, "send").empty
