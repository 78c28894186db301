"""The synthetic Double-11 generator: schema, determinism, the night's shape."""

from __future__ import annotations

from datetime import UTC, date, datetime

import numpy as np
import pyarrow.parquet as pq
import pytest

from spark_reports import schema
from spark_reports.errors import ReportError
from spark_reports.generator import Double11Config, generate_double11
from spark_reports.generator.buckets import synthesize

START = datetime(2026, 11, 10, 23, 55, tzinfo=UTC)


def read(out, table):
    return pq.read_table(out / table).sort_by([("ts", "ascending"), ("broker", "ascending")])


def test_writes_both_tables_in_the_contract_schema_with_date_partitions(tmp_path):
    cfg = Double11Config(brokers=4, hours=0.25, start=START, ops=("send", "pull", "flush"))
    result = generate_double11(cfg, tmp_path)
    assert result.latency_rows == 4 * 900 * 3
    assert result.broker_stats_rows == 4 * 900
    for table in (schema.LATENCY_TABLE, schema.BROKER_STATS_TABLE):
        days = sorted(p.name for p in (tmp_path / table).iterdir())
        assert days == ["date=2026-11-10", "date=2026-11-11"]
        for day in days:
            files = list((tmp_path / table / day).iterdir())
            assert [f.name for f in files] == ["part-00000.parquet"]
            schema.check_arrow_schema(pq.read_schema(files[0]), table)
    for day in (date(2026, 11, 10), date(2026, 11, 11)):
        part = pq.read_table(tmp_path / schema.partition_dir("latency", day))
        assert all(r is None for r in schema.quarantine_reasons(part, day))


def test_same_seed_same_bytes_other_seed_other_night(tmp_path):
    cfg = Double11Config(brokers=3, hours=0.05, start=START, seed=7)
    generate_double11(cfg, tmp_path / "a")
    generate_double11(cfg, tmp_path / "b")
    other = Double11Config(brokers=3, hours=0.05, start=START, seed=8)
    generate_double11(other, tmp_path / "c")
    a, b, c = (read(tmp_path / x, "latency") for x in "abc")
    assert a.equals(b)
    assert not a.column("count").equals(c.column("count"))


def test_flash_peak_ramps_within_seconds_and_latency_rises(tmp_path):
    cfg = Double11Config(brokers=5, hours=0.25, start=START, ops=("send",))
    generate_double11(cfg, tmp_path)
    t = read(tmp_path, "latency").to_pandas()
    per_s = t.groupby("ts").agg(count=("count", "sum"), sum_us=("sum_us", "sum"))
    midnight = datetime(2026, 11, 11, tzinfo=UTC)
    before = per_s[per_s.index < midnight]["count"].mean()
    top = per_s[(per_s.index >= midnight) & (per_s.index < midnight.replace(minute=1))]["count"]
    assert top.max() > 8 * before
    assert top.iloc[8:].min() > 8 * before  # at the top within the first seconds
    mean_before = per_s[per_s.index < midnight].sum()
    mean_after = top.index.map(per_s["sum_us"].get).to_numpy().sum() / top.sum()
    assert mean_after > 1.2 * mean_before["sum_us"] / mean_before["count"]


def test_consumer_lag_builds_in_the_peak(tmp_path):
    cfg = Double11Config(brokers=2, hours=0.2, start=START)
    generate_double11(cfg, tmp_path)
    s = read(tmp_path, "broker_stats").to_pandas()
    lag = s.groupby("ts")["consumer_lag"].sum()
    assert lag.iloc[-1] > 10 * max(lag.iloc[0], 1)
    offsets = (
        s.sort_values("ts")
        .groupby("broker")["commit_offset"]
        .apply(lambda x: np.all(np.diff(x.to_numpy()) >= 0))
    )
    assert offsets.all()


def test_synthesized_counts_are_consistent_and_spikes_reach_their_max():
    rng = np.random.default_rng(1)
    n = 200
    h = synthesize(
        rng,
        calls=np.full(n, 5000),
        median_s=np.full(n, 0.0004),
        sigma=np.full(n, 0.3),
        tail_share=np.full(n, 0.01),
        spike_max_s=np.where(np.arange(n) < 10, 1.5, 0.0),
        spike_share=np.full(n, 0.3),
    )
    sums = np.add.reduceat(h.counts, h.offsets[:-1])
    assert np.array_equal(sums, h.count)
    assert np.all(np.diff(h.keys[h.offsets[0] : h.offsets[1]]) > 0)
    assert np.all(h.min_us <= h.max_us)
    assert np.all(h.max_us[:10] > 1_000_000) and np.all(h.max_us[10:] < 100_000)
    assert abs(h.count.mean() - 5000) < 100


def test_refuses_to_overwrite_and_rejects_unknown_ops(tmp_path):
    cfg = Double11Config(brokers=1, hours=0.01, start=START)
    generate_double11(cfg, tmp_path)
    with pytest.raises(ReportError, match="already exists"):
        generate_double11(cfg, tmp_path)
    generate_double11(cfg, tmp_path, force=True)
    with pytest.raises(ReportError, match="unknown op nope"):
        generate_double11(Double11Config(brokers=1, hours=0.01, ops=("nope",)), tmp_path / "x")


def test_default_start_puts_the_flash_peak_in_view():
    from spark_reports.generator.model import default_start

    assert default_start(1) == datetime(2026, 11, 10, 23, 30, tzinfo=UTC)
    assert default_start(0.01) == datetime(2026, 11, 10, 23, 59, 42, tzinfo=UTC)
    assert default_start(4) == datetime(2026, 11, 10, 22, 0, tzinfo=UTC)
    assert default_start(24) == datetime(2026, 11, 10, 22, 0, tzinfo=UTC)  # peak 2 h in


def test_each_broker_has_its_own_latency_character(tmp_path):
    from heatmap import SLA_MAX_S, LatencyHistogram
    from heatmap.metrics_log import histogram_from_row

    evening = datetime(2026, 11, 10, 20, 0, tzinfo=UTC)  # before the peak: few stalls
    cfg = Double11Config(brokers=8, hours=0.1, start=evening, ops=("send",), seed=3)
    generate_double11(cfg, tmp_path)
    merged: dict[str, LatencyHistogram] = {}
    for r in pq.read_table(tmp_path / "latency").to_pylist():
        h = histogram_from_row(r)
        merged.setdefault(r["broker"], LatencyHistogram()).merge(h)
    quiet = [h for h in merged.values() if h.max < SLA_MAX_S]  # no stall or GC pause
    assert len(quiet) >= 5
    # Brokers alike to the digit were the defect: now most quantiles differ broker to broker.
    for q in (0.5, 0.99, 0.999):
        assert len({h.quantile(q) for h in quiet}) >= len(quiet) // 2 + 1, q
    assert len({h.max for h in quiet}) == len(quiet)
    assert max(h.quantile(0.999) for h in quiet) > 1.3 * min(h.quantile(0.999) for h in quiet)


def test_latency_1m_is_the_exact_rollup_of_the_seconds_across_chunks_and_days(tmp_path):
    from heatmap.rollup import rollup_rows

    # 7 brokers x 3 ops: chunks of 2,857 s, so chunk ends cut minutes; the start is
    # mid-minute and the night crosses 00:00, so minutes are partial at both ends.
    start = datetime(2026, 11, 10, 23, 40, 30, tzinfo=UTC)
    cfg = Double11Config(brokers=7, hours=0.9, start=start, ops=("send", "pull", "flush"))
    generate_double11(cfg, tmp_path)
    for day in (date(2026, 11, 10), date(2026, 11, 11)):
        seconds = pq.read_table(tmp_path / schema.partition_dir(schema.LATENCY_TABLE, day))
        minutes = pq.read_table(tmp_path / schema.partition_dir(schema.LATENCY_1M_TABLE, day))
        schema.check_arrow_schema(minutes.schema, schema.LATENCY_1M_TABLE)
        assert all(r is None for r in schema.quarantine_reasons(minutes, day))
        assert minutes.to_pylist() == rollup_rows(seconds.to_pylist())
    first = pq.read_table(tmp_path / "latency_1m").column("ts").to_pylist()
    assert min(first) == datetime(2026, 11, 10, 23, 40, tzinfo=UTC)  # the partial first minute


def test_seconds_go_broker_by_broker_in_small_indexed_pages(tmp_path):
    """A drill-down after one broker's minutes reads a page or two of a row group: each
    row group is ordered by broker then time, its pages are small and indexed."""
    start = datetime(2026, 11, 11, 0, 0, tzinfo=UTC)  # 6 minutes: a row group of 5, one of 1
    generate_double11(Double11Config(brokers=100, hours=0.1, start=start, ops=("send", "pull")),
                      tmp_path)  # fmt: skip
    path = next((tmp_path / schema.LATENCY_TABLE).glob("date=2026-11-11/*.parquet"))
    pf = pq.ParquetFile(path)
    assert pf.num_row_groups > 1
    for i in range(pf.num_row_groups):
        group = pf.read_row_group(i, columns=["broker", "ts"])
        keys = list(zip(group["broker"].to_pylist(), group["ts"].to_pylist(), strict=True))
        assert keys == sorted(keys)
        assert len(set(group["broker"].to_pylist())) == 100
        column = pf.metadata.row_group(i).column(0)
        assert column.has_column_index and column.has_offset_index
