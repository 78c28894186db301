"""The Spark side of the metrics-log contract: schema checks, and Spark rules
that agree with heatmap.metrics_log's numpy rules row by row."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pyarrow as pa
import pytest

from heatmap import LatencyHistogram
from heatmap.metrics_log import latency_row, quarantine_reasons
from spark_reports import schema
from spark_reports.errors import SchemaMismatch

T0 = datetime(2026, 11, 11, 0, 0, 5, tzinfo=UTC)


def row(**over):
    """A good latency row as the broker encodes it, with fields overridden."""
    h = LatencyHistogram()
    h.record_many([0.0001, 0.0001, 0.0003])
    return {**latency_row(T0, "c1", "b1", "send", h, msgs=3, nbytes=3000), **over}


def table(rows):
    return pa.Table.from_pylist(rows, schema=schema.LATENCY_SCHEMA)


# One row per rule (and good ones): Spark must give each the numpy rules' reason.
VARIANTS = [
    {},
    {"broker": None},
    {"buckets": [(-106, None), (-90, 1)]},
    {"count": -1, "buckets": [(-100, -1)]},
    {"bytes": -5},
    {"count": 4},
    {"op": "sned"},
    {"ts": datetime(2026, 11, 12, 0, 0, 1, tzinfo=UTC)},
    {"buckets": [(500, 3)]},
    {"buckets": [(-160, 1), (128, 2)]},
    {"min_us": 600},
    {"count": 0, "buckets": [], "min_us": 0, "max_us": 0, "sum_us": 0},
]


def test_arrow_schema_check_names_the_column():
    schema.check_arrow_schema(schema.LATENCY_SCHEMA)
    bad = schema.LATENCY_SCHEMA.set(4, pa.field("count", pa.string()))
    with pytest.raises(SchemaMismatch, match="'count' has type string"):
        schema.check_arrow_schema(bad)
    with pytest.raises(SchemaMismatch, match="'buckets' is missing"):
        schema.check_arrow_schema(schema.LATENCY_SCHEMA.remove(8))


def test_importing_schema_does_not_import_pyspark():
    import subprocess
    import sys

    code = "import sys, spark_reports.schema; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_spark_rules_match_arrow_rules(spark, tmp_path):
    from pyspark.sql import functions as F

    path = tmp_path / "latency" / "date=2026-11-11"
    path.mkdir(parents=True)
    import pyarrow.parquet as pq

    rows = table([row(**v) for v in VARIANTS])
    want = list(quarantine_reasons(rows, date(2026, 11, 11)))
    assert set(want) == {*schema.REASONS, None}  # every rule is exercised
    pq.write_table(rows, path / "part-0.parquet")
    df = spark.read.parquet(str(tmp_path / "latency"))
    df = schema.conform_spark_frame(df)
    got = df.select(schema.spark_quarantine_reason().alias("r"), "ts", "count").collect()
    # Spark returns the rows in file order for one small file.
    assert [r.r for r in got] == want
    good = df.filter(schema.spark_row_is_good()).count()
    assert good == want.count(None)
    assert df.filter(F.col("op") == "send").count() == len(VARIANTS) - 1


def test_spark_schema_check_names_the_column(spark):
    df = spark.createDataFrame([("x", 1)], "ts string, count int")
    with pytest.raises(SchemaMismatch, match="'ts' has type string, expected timestamp"):
        schema.conform_spark_frame(df)
