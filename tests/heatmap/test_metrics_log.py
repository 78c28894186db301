"""The metrics-log contract: rows to and from histograms, the numpy quarantine rules."""

from __future__ import annotations

from datetime import UTC, date, datetime

import numpy as np
import pyarrow as pa
import pytest

from heatmap import HeatmapError, LatencyHistogram
from heatmap import metrics_log as ml

T0 = datetime(2026, 11, 11, 0, 0, 5, tzinfo=UTC)


def row(**over):
    base = dict(
        ts=T0,
        cluster="c1",
        broker="b1",
        op="send",
        count=3,
        sum_us=900,
        min_us=100,
        max_us=500,
        buckets=[(-106, 2), (-90, 1)],
        msgs=3,
        bytes=3000,
    )
    base.update(over)
    return base


def table(rows):
    return pa.Table.from_pylist(rows, schema=ml.LATENCY_SCHEMA)


BAD_ROWS = [
    (row(), None),
    (row(broker=None), ml.NULL_FIELD),
    (row(buckets=[(-106, None), (-90, 1)]), ml.NULL_FIELD),
    (row(count=-1, buckets=[(-100, -1)]), ml.NEGATIVE),
    (row(bytes=-5), ml.NEGATIVE),
    (row(count=4), ml.COUNT_MISMATCH),
    (row(op="sned"), ml.UNKNOWN_OP),
    (row(ts=datetime(2026, 11, 12, 0, 0, 1, tzinfo=UTC)), ml.TIME_OUT_OF_RANGE),
    (row(buckets=[(500, 3)]), ml.BAD_BUCKET),
    (row(buckets=[(-161, 3)]), ml.BAD_BUCKET),
    (row(buckets=[(-160, 1), (128, 2)]), None),  # zero bucket and largest index are legal
    (row(min_us=600), ml.MIN_OVER_MAX),
    (row(count=0, buckets=[], min_us=0, max_us=0, sum_us=0), None),
]


def test_numpy_rules_name_the_first_broken_rule():
    reasons = ml.quarantine_reasons(table([r for r, _ in BAD_ROWS]), date(2026, 11, 11))
    assert list(reasons) == [want for _, want in BAD_ROWS]


def test_without_a_partition_day_only_the_sane_range_applies():
    rows = [row(ts=datetime(2026, 11, 12, tzinfo=UTC)), row(ts=datetime(1999, 1, 1, tzinfo=UTC))]
    assert list(ml.quarantine_reasons(table(rows))) == [None, ml.TIME_OUT_OF_RANGE]


def test_rules_read_a_sliced_table():
    t = table([r for r, _ in BAD_ROWS]).slice(3, 4)
    assert list(ml.quarantine_reasons(t, date(2026, 11, 11))) == [w for _, w in BAD_ROWS[3:7]]


def _hist(seed=0, n=500):
    h = LatencyHistogram()
    h.record_many(np.random.default_rng(seed).lognormal(-7, 1, n))
    h.record(0.0)  # the zero bucket is a key like any other
    return h


def test_latency_row_is_what_the_broker_writes():
    h = _hist()
    got = ml.latency_row(1_794_355_200, "c1", "b1", "send", h, msgs=501, nbytes=64_128)
    assert got == {
        "ts": datetime(2026, 11, 11, tzinfo=UTC),
        "cluster": "c1",
        "broker": "b1",
        "op": "send",
        "count": 501,
        "sum_us": round(h.sum * 1e6),
        "min_us": 0,
        "max_us": round(h.max * 1e6),
        "buckets": list(h.buckets.items()),
        "msgs": 501,
        "bytes": 64_128,
    }
    assert list(ml.quarantine_reasons(table([got]), date(2026, 11, 11))) == [None]


def test_row_round_trip_through_parquet_layout_keeps_the_histogram():
    h = _hist(seed=3)
    written = table([ml.latency_row(T0, "c1", "b1", "send", h, 1, 1)]).to_pylist()[0]
    back = ml.histogram_from_row(written)
    assert back.buckets == h.buckets and back.count == h.count
    assert back.quantile(0.99) == h.quantile(0.99)
    # sum, min and max come back at the log's microsecond precision
    assert back.sum == pytest.approx(h.sum, abs=1e-6)
    assert back.max == round(h.max * 1e6) / 1e6
    assert ml.histogram_from_row({**written, "buckets": dict(written["buckets"])}) == back


def test_empty_histogram_row_and_bad_rows():
    empty = ml.latency_row(T0, "c1", "b1", "pull", LatencyHistogram(), 0, 0)
    assert (empty["count"], empty["sum_us"], empty["min_us"], empty["buckets"]) == (0, 0, 0, [])
    assert ml.histogram_from_row(empty) == LatencyHistogram()
    with pytest.raises(HeatmapError, match="count 4 != sum"):
        ml.histogram_from_row(row(count=4))
    with pytest.raises(HeatmapError, match="schema-3"):
        ml.latency_row(T0, "c1", "b1", "send", _hist().downscale(2), 1, 1)


def test_broker_stats_row_fits_its_schema():
    got = ml.broker_stats_row(1_794_355_200, "c1", "b1", 1, 2, 200.0, 1.0, 12345, 0)
    back = pa.Table.from_pylist([got], schema=ml.BROKER_STATS_SCHEMA).to_pylist()[0]
    assert back == got
    assert ml.partition_dir(ml.LATENCY_TABLE, date(2026, 11, 11)) == "latency/date=2026-11-11"


def test_importing_heatmap_does_not_import_pyarrow():
    import subprocess
    import sys

    code = "import sys, heatmap; print('pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
