"""The capacity job's Spark steps, cross-checked against pandas on the same Parquet."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest


@pytest.fixture(scope="module")
def latency(spark, metrics_log):
    from spark_reports.capacity_report import frames as cf
    from spark_reports.schema import conform_spark_frame

    root, _ = metrics_log
    df = conform_spark_frame(spark.read.parquet(str(root / "latency")), "latency")
    good, bad = cf.split_quarantine(df)
    assert bad.count() == 1
    return good.cache()


def test_rates_peaks_and_load_match_pandas(latency, metrics_log):
    from spark_reports.capacity_report import frames as cf

    _, frame = metrics_log
    send = frame[frame.op == "send"]
    per_second = send.groupby("ts").msgs.sum()
    broker_rates = cf.broker_second_rates(latency)
    days = cf.daily_peaks(cf.cluster_second_rates(broker_rates)).toPandas()
    assert len(days) == 2
    for _, d in days.iterrows():
        mine = per_second[per_second.index.date == d["day"]]
        assert d["peak_msgs_per_s"] == mine.max()
        assert d["total_msgs"] == mine.sum() and d["seconds"] == len(mine)
        assert d["peak_to_mean"] == pytest.approx(mine.max() / mine.mean())
        assert pd.Timestamp(d["peak_ts"]).tz_localize("UTC") == mine.idxmax()

    load = cf.broker_load(broker_rates, 2000.0).toPandas().set_index("broker")
    expect = send.groupby("broker").msgs.agg(["max", "mean"])
    assert (load.peak_msgs_per_s == expect["max"]).all()
    assert np.allclose(load.mean_msgs_per_s, expect["mean"])
    assert np.allclose(load.utilisation, expect["max"] / 2000.0)
    # ANSI mode (Spark 4's default) raises on x / 0; the frames give null instead
    assert spark_conf_ansi(broker_rates)
    assert cf.broker_load(broker_rates, 0.0).toPandas().utilisation.isna().all()


def spark_conf_ansi(df) -> bool:
    return df.sparkSession.conf.get("spark.sql.ansi.enabled") == "true"


def test_latency_totals_buckets_and_spikes_match_pandas(latency, metrics_log):
    from spark_reports.capacity_report import frames as cf

    _, frame = metrics_log
    send = frame[frame.op == "send"]
    totals = cf.latency_totals(latency).toPandas().set_index("broker")
    assert totals.loc["ALL", "count"] == send["count"].sum()
    assert totals.loc["ALL", "max_us"] == send.max_us.max()
    assert totals.loc["b2", "sum_us"] == send[send.broker == "b2"].sum_us.sum()

    merged: dict[tuple[str, int], int] = {}
    for broker, buckets in zip(send.broker, send.buckets, strict=True):
        for k, c in buckets:
            for key in ((broker, k), ("ALL", k)):
                merged[key] = merged.get(key, 0) + c
    got = {(r.broker, r.bucket): r["count"] for r in cf.latency_buckets(latency).collect()}
    assert got == merged

    spikes = cf.spike_seconds(latency).toPandas()
    assert spikes.broker.tolist() == ["b1"] and spikes.spike_seconds.tolist() == [3]
    assert spikes.worst_max_us[0] == send[send.broker == "b1"].max_us.max()


def test_disk_growth(spark, metrics_log):
    from spark_reports.capacity_report import frames as cf

    root, _ = metrics_log
    disk = cf.disk_growth(spark.read.parquet(str(root / "broker_stats"))).toPandas()
    b0 = disk.set_index("broker").loc["b0"]
    assert b0.growth_bytes_per_s == pytest.approx(1e6)  # 1 MB more every second
    assert b0.hours_to_water == pytest.approx((0.75e12 - (1e11 + 230e6)) / 1e6 / 3600)


def test_spikes_from_the_heatmap_jobs_percentiles(spark):
    from spark_reports.capacity_report import frames as cf

    t = datetime(2026, 11, 11, tzinfo=UTC)
    rows = [  # window_start, broker, op, count, mean, p50, p99, p999, max (seconds)
        (t, "b0", "send", 10, 0.001, 0.001, 0.002, 0.002, 0.5),
        (t + timedelta(minutes=1), "b0", "send", 10, 0.001, 0.001, 0.002, 0.002, 0.03),
        (t, "b1", "send", 10, 0.001, 0.001, 0.002, 0.002, 0.019),
        (t, "b2", "pull", 10, 0.001, 0.001, 0.002, 0.002, 0.9),
        (t, "ALL", "send", 30, 0.001, 0.001, 0.002, 0.002, 0.5),
    ]
    cols = "window_start timestamp, broker string, op string, count long, mean double, p50 double, p99 double, p999 double, max double"
    got = cf.spikes_from_heatmap(spark.createDataFrame(rows, cols)).collect()
    assert [(r.broker, r.spike_windows, r.worst_max_us) for r in got] == [("b0", 2, 500_000)]


def test_one_pass_rollups_equal_the_per_second_frames(spark, metrics_log):
    """second_rollups (the job's single pass) gives what the per-broker-second frames
    give, and counts the quarantined row by its reason."""
    from spark_reports.capacity_report import frames as cf
    from spark_reports.schema import COUNT_MISMATCH, conform_spark_frame

    root, _ = metrics_log
    raw = conform_spark_frame(spark.read.parquet(str(root / "latency")), "latency")
    rollups = cf.second_rollups(cf.with_reason(raw)).cache()
    good, _ = cf.split_quarantine(raw)
    rates = cf.broker_second_rates(good)

    def rows(df, key):
        return sorted((r.asDict() for r in df.collect()), key=lambda r: r[key])

    assert rows(cf.rollup_cluster_rates(rollups), "ts") == rows(cf.cluster_second_rates(rates), "ts")
    assert rows(cf.rollup_broker_load(rollups, 2000.0), "broker") == rows(
        cf.broker_load(rates, 2000.0), "broker"
    )
    assert rows(cf.rollup_spike_seconds(rollups), "broker") == rows(cf.spike_seconds(good), "broker")
    assert [r.asDict() for r in cf.rollup_reasons(rollups).collect()] == [
        {"reason": COUNT_MISMATCH, "rows": 1}
    ]
    rollups.unpersist()
