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
    from spark_reports import schema
    from spark_reports.heatmap_report import frames as hf

    df = spark.createDataFrame(rows(), schema.spark_schema())
    agg = hf.with_cluster_rows(hf.window_aggregate(df, 60)).cache()
    got = {
        r["broker"]: r.asDict()
        for r in hf.percentiles(hf.buckets_of(agg), hf.stats_of(agg)).collect()
    }
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
    heat = {(r["broker"], r["bucket"]): r["count"] for r in hf.buckets_of(agg).collect()}
    assert heat == {("b1", -160): 3, ("b1", -80): 1, ("b1", -70): 1, ("b1", -66): 1,
                    ("ALL", -160): 3, ("ALL", -80): 1, ("ALL", -70): 1, ("ALL", -66): 1}  # fmt: skip
    agg.unpersist()


def test_spark_bucket_bounds_are_heatmaps_for_every_index(spark):
    from pyspark.sql import functions as F

    from heatmap import MAX_INDEX, ZERO_INDEX, bucket_lower, bucket_upper
    from spark_reports.heatmap_report import frames as hf

    df = spark.range(ZERO_INDEX, MAX_INDEX + 1).select(F.col("id").cast("int").alias("b"))
    got = {
        r.b: (r.lower, r.upper)
        for r in df.select(
            "b", hf.bucket_lower(F.col("b")).alias("lower"), hf.bucket_upper(F.col("b")).alias("upper")
        ).collect()
    }
    want = {i: (bucket_lower(i), bucket_upper(i)) for i in range(ZERO_INDEX, MAX_INDEX + 1)}
    assert got == want  # the very floats, not close ones
