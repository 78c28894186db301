"""The capacity job's Spark steps, cross-checked against pandas on the same Parquet."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_reports.schema import BROKER_STATS_SCHEMA, LATENCY_SCHEMA

START = datetime(2026, 11, 10, 23, 58, 0, tzinfo=UTC)  # spans two date= partitions
SECONDS = 240
BROKERS = ("b0", "b1", "b2")


def _latency_rows(rng: np.random.Generator) -> list[dict]:
    rows = []
    for s in range(SECONDS):
        ts = START + timedelta(seconds=s)
        flash = 8.0 if 120 <= s < 130 else 1.0  # 00:00 flash peak
        for i, broker in enumerate(BROKERS):
            for op in ("send", "pull"):
                msgs = int(rng.integers(500, 1500) * flash * (1 + i))
                count = msgs if op == "send" else max(1, msgs // 32)
                lat = rng.lognormal(np.log(0.0008), 0.5, size=5)
                if broker == "b1" and op == "send" and s in (30, 31, 200):
                    lat[0] = 0.35  # a PageCache stall
                idx = np.ceil(np.log2(lat) * 8).astype(int)
                per = np.full(5, count // 5)
                per[0] += count - per.sum()
                buckets = {}
                for k, c in zip(idx.tolist(), per.tolist(), strict=True):
                    buckets[k] = buckets.get(k, 0) + c
                rows.append({
                    "ts": ts, "cluster": "trade", "broker": broker, "op": op, "count": count,
                    "sum_us": int((lat * per).sum() * 1e6), "min_us": int(lat.min() * 1e6),
                    "max_us": int(lat.max() * 1e6), "buckets": list(buckets.items()),
                    "msgs": msgs, "bytes": msgs * 1000,
                })  # fmt: skip
    return rows


def _write(root, table: str, schema: pa.Schema, rows: list[dict]) -> None:
    by_day: dict[date, list[dict]] = {}
    for r in rows:
        by_day.setdefault(r["ts"].date(), []).append(r)
    for day, part in by_day.items():
        d = root / table / f"date={day.isoformat()}"
        d.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(part, schema=schema), d / "part-00000.parquet")


@pytest.fixture(scope="module")
def metrics_log(tmp_path_factory):
    root = tmp_path_factory.mktemp("log")
    rng = np.random.default_rng(11)
    rows = _latency_rows(rng)
    bad = dict(rows[0], count=rows[0]["count"] + 1)  # count != sum(buckets): quarantined
    _write(root, "latency", LATENCY_SCHEMA, rows + [bad])
    stats = [
        {"ts": START + timedelta(seconds=s), "cluster": "trade", "broker": b,
         "disk_used_bytes": 10**11 * (i + 1) + s * 10**6 * (i + 1), "disk_total_bytes": 10**12,
         "msgs_in_per_s": 1.0, "msgs_out_per_s": 15.0, "commit_offset": s, "consumer_lag": 0}
        for s in range(0, SECONDS, 10) for i, b in enumerate(BROKERS)
    ]  # fmt: skip
    _write(root, "broker_stats", BROKER_STATS_SCHEMA, stats)
    frame = pd.DataFrame(rows)
    return root, frame


@pytest.fixture(scope="module")
def latency(spark, metrics_log):
    from spark_reports import capacity_frames as cf
    from spark_reports.schema import conform_spark_frame

    root, _ = metrics_log
    df = conform_spark_frame(spark.read.parquet(str(root / "latency")), "latency")
    good, bad = cf.split_quarantine(df)
    assert bad.count() == 1
    return good.cache()


def test_rates_peaks_and_load_match_pandas(latency, metrics_log):
    from spark_reports import capacity_frames as cf

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
    from spark_reports import capacity_frames as cf

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
    from spark_reports import capacity_frames as cf

    root, _ = metrics_log
    disk = cf.disk_growth(spark.read.parquet(str(root / "broker_stats"))).toPandas()
    b0 = disk.set_index("broker").loc["b0"]
    assert b0.growth_bytes_per_s == pytest.approx(1e6)  # 1 MB more every second
    assert b0.hours_to_water == pytest.approx((0.75e12 - (1e11 + 230e6)) / 1e6 / 3600)


def test_job_writes_json_and_self_contained_html(spark, metrics_log, tmp_path):
    from capacity.usl import usl_throughput
    from spark_reports.jobs import capacity as job

    root, frame = metrics_log
    points = tmp_path / "sweep.csv"
    ns = (1, 2, 4, 8, 16, 32, 64)
    points.write_text("concurrency,throughput\n" + "\n".join(
        f"{n},{usl_throughput(n, 0.03, 0.0005, 400.0):.4f}" for n in ns) + "\n")  # fmt: skip
    parser = argparse.ArgumentParser()
    job.add_arguments(parser)
    out = tmp_path / "out"
    args = parser.parse_args([
        "--input", str(root), "--out", str(out), "--target-date", "2027-11-11",
        "--load-test", str(points), "--sla-rate", "20000",
    ])  # fmt: skip
    plan = job.run(args, spark=spark)
    saved = json.loads((out / "capacity.json").read_text())
    assert saved["verdict"] == plan["verdict"]
    v = saved["verdict"]
    measured_peak = frame[frame.op == "send"].groupby("ts").msgs.sum().max()
    assert saved["inputs"]["measured_peak_msgs_per_s"] == measured_peak
    assert v["forecast_peak_msgs_per_s"]["low"] <= v["forecast_peak_msgs_per_s"]["high"]
    assert saved["inputs"]["quarantined_rows"] == 1
    assert saved["usl"]["sigma"] == pytest.approx(0.03, rel=1e-3)
    risk = {r["broker"]: " ".join(r["reasons"]) for r in saved["at_risk"]}
    assert "3 s over 20 ms" in risk["b1"]
    checks = {c["check"]: c["pass"] for c in v["checks"]}
    assert checks["max send <= 20 ms"] is False  # the 350 ms stall
    html = (out / "report.html").read_text()
    if os.environ.get("FLOODGATE_KEEP_REPORT"):
        shutil.copytree(out, os.environ["FLOODGATE_KEEP_REPORT"], dirs_exist_ok=True)
    assert html.count("data:image/png;base64,") >= 3
    assert "http://" not in html and "https://" not in html  # self-contained
    assert html.index("Capacity plan for 2027-11-11") < html.index("Inputs and assumptions")


def test_empty_input_is_a_clear_error(spark, tmp_path):
    from spark_reports.errors import ReportError
    from spark_reports.jobs import capacity as job

    parser = argparse.ArgumentParser()
    job.add_arguments(parser)
    args = parser.parse_args(["--input", str(tmp_path / "nothing"), "--out", str(tmp_path / "o"),
                              "--target-date", "2027-11-11"])  # fmt: skip
    with pytest.raises(ReportError, match="latency"):
        job.run(args, spark=spark)


def test_spikes_from_the_heatmap_jobs_percentiles(spark):
    from spark_reports import capacity_frames as cf

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
