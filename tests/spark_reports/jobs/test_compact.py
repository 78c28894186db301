"""`report compact` rolls a log's seconds up into latency_1m exactly, and a heatmap
read from the minute rows equals the one read from the seconds."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime

import pyarrow.parquet as pq
import pytest

from spark_reports import schema
from spark_reports.generator import Double11Config, generate_double11
from spark_reports.jobs.compact import CompactOptions, run_compact
from spark_reports.jobs.heatmap import HeatmapOptions, run_heatmap
from tests.report_rows import differences
from tests.report_rows import rows as rows_of
from tests.spark_reports.jobs.test_heatmap import bad_rows

START = datetime(2026, 11, 10, 23, 57, 30, tzinfo=UTC)  # mid-minute, across 00:00


def rows(path) -> list[dict]:
    table = pq.read_table(path)
    key = lambda r: (r["ts"], r["broker"], r["op"])  # noqa: E731
    return sorted((dict(r, date=str(r["date"])) for r in table.to_pylist()), key=key)


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    root = tmp_path_factory.mktemp("compact")
    log = root / "log"
    generate_double11(Double11Config(brokers=3, hours=0.1, start=START, seed=9), log)
    pq.write_table(bad_rows(), log / "latency" / "date=2026-11-11" / "part-bad.parquet")
    shutil.move(log / "latency_1m", root / "written")  # the generator's rollup, set aside
    return root


def test_compact_equals_the_writers_rollup_and_heatmaps_agree(spark, log, capsys):
    from console.cli import main

    seconds = run_heatmap(HeatmapOptions(input=str(log / "log"), out=str(log / "a"), window_s=60),
                          spark=spark)  # fmt: skip
    assert seconds["table"] == schema.LATENCY_TABLE  # no rollups yet: read from the seconds

    summary = run_compact(CompactOptions(input=str(log / "log")), spark=spark)
    assert summary["days"] == ["2026-11-10", "2026-11-11"]
    assert summary["quarantined"] == 4 and summary["quarantine_reasons"] == {
        schema.COUNT_MISMATCH: 1, schema.UNKNOWN_OP: 1, schema.NEGATIVE: 1,
        schema.TIME_OUT_OF_RANGE: 1,
    }  # fmt: skip
    compacted = log / "log" / schema.LATENCY_1M_TABLE
    schema.check_arrow_schema(pq.read_schema(next(compacted.rglob("*.parquet"))), "latency_1m")
    assert rows(compacted) == rows(log / "written")  # the bad seconds are left out
    assert summary["minute_rows"] == len(rows(compacted))

    minutes = run_heatmap(HeatmapOptions(input=str(log / "log"), out=str(log / "b"), window_s=60),
                          spark=spark)  # fmt: skip
    assert minutes["table"] == schema.LATENCY_1M_TABLE
    assert minutes["verdict"] == seconds["verdict"]
    keys = ("window_start", "broker", "op")
    assert rows_of(log / "a" / "heatmap", (*keys, "bucket")) == rows_of(
        log / "b" / "heatmap", (*keys, "bucket")
    )
    # floats to 1e-9 (tests/report_rows.py: the host's vector division, now and then)
    assert not differences(rows_of(log / "a" / "percentiles", keys),
                           rows_of(log / "b" / "percentiles", keys))
    # a 30 s window needs seconds: read from latency again
    half = HeatmapOptions(input=str(log / "log"), out=str(log / "c"), window_s=30,
                          start=datetime(2026, 11, 11, tzinfo=UTC))  # fmt: skip
    assert run_heatmap(half, spark=spark)["table"] == schema.LATENCY_TABLE

    assert main(["report", "compact", "--input", str(log / "log")]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert main(["report", "compact", "--input", str(log / "nowhere")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no metrics log at" in err[0]


def test_compacting_one_day_again_keeps_the_others(spark, log):
    """Only the days rolled up are replaced (dynamic partition overwrite, an option of
    the write: the session's own setting is left as it was)."""
    root = log / "log"
    run_compact(CompactOptions(input=str(root)), spark=spark)  # both days, if not yet
    compacted = root / schema.LATENCY_1M_TABLE
    before = rows(compacted)
    shutil.rmtree(compacted / "date=2026-11-11")
    again = run_compact(CompactOptions(input=str(root)), spark=spark)
    assert again["days"] == ["2026-11-11"] and rows(compacted) == before
    assert spark.conf.get("spark.sql.sources.partitionOverwriteMode").lower() == "static"
