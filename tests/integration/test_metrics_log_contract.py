"""The broker's metrics log and spark_reports read the same contract (DESIGN.md).

broker_core may not import spark_reports, so each writes the schema down; this
test holds them equal and runs the reader's quarantine rules on broker output.
"""

from datetime import date

import numpy as np
import pyarrow.parquet as pq

from broker_core.observe import metrics_log
from broker_core.observe.recorder import OpRecorder
from spark_reports import schema


class Clock:
    t = 1_794_355_200.0  # 2026-11-11 00:00:00 UTC

    def __call__(self):
        return self.t


def test_schemas_are_the_same():
    assert metrics_log.LATENCY_SCHEMA.equals(schema.LATENCY_SCHEMA)
    assert metrics_log.BROKER_STATS_SCHEMA.equals(schema.BROKER_STATS_SCHEMA)


def test_broker_rows_pass_the_readers_checks(tmp_path):
    clock = Clock()
    rec = OpRecorder(("send", "pull", "flush"), clock)
    writer = metrics_log.MetricsLogWriter(tmp_path, "c1", "b1", roll_s=60)
    rng = np.random.default_rng(0)
    for _ in range(5):
        for v in rng.lognormal(-7, 1, 200):
            rec.record("send", float(v), nbytes=128)
        rec.record("pull", 0.0)  # the zero bucket must be a legal key too
        clock.t += 1
        closed = rec.roll()
        writer.add_seconds(closed)
        writer.add_stats(closed[0].ts, 1, 2, 200.0, 1.0, 12345, 0)
    files = writer.roll()
    assert len(files) == 2
    latency = pq.read_table(tmp_path / "latency" / "date=2026-11-11")
    schema.check_arrow_schema(latency.schema, schema.LATENCY_TABLE)
    table = pq.read_table(next((tmp_path / "latency").rglob("*.parquet")))
    reasons = schema.quarantine_reasons(table, date(2026, 11, 11))
    assert all(r is None for r in reasons), set(reasons)
    stats = pq.read_table(next((tmp_path / "broker_stats").rglob("*.parquet")))
    schema.check_arrow_schema(stats.schema, schema.BROKER_STATS_TABLE)
