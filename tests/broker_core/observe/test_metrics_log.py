"""The broker's metrics log writes heatmap's contract: files the readers accept,
histograms that come back as recorded (to the log's microsecond precision)."""

import subprocess
import sys
from datetime import date
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from broker_core.observe.metrics_log import MetricsLogWriter
from broker_core.observe.recorder import OpRecorder
from heatmap import metrics_log as contract
from tests.clock import ManualClock


def test_rolled_files_follow_the_contract_and_pass_the_quarantine(tmp_path):
    clock = ManualClock(1_794_355_200.0)
    rec = OpRecorder(("send", "pull", "flush"), clock)
    writer = MetricsLogWriter(tmp_path, "c1", "b1", roll_s=60)
    rng = np.random.default_rng(0)
    recorded = []
    for _ in range(5):
        for v in rng.lognormal(-7, 1, 200):
            rec.record("send", float(v), nbytes=128)
        rec.record("pull", 0.0)  # the zero bucket must be a legal key too
        clock.t += 1
        closed = rec.roll()
        recorded += [s.ops["send"].hist for s in closed]
        writer.add_seconds(closed)
        writer.add_stats(closed[0].ts, 1, 2, 200.0, 1.0, 12345, 0)
    files = writer.roll()
    assert [f.parent.relative_to(tmp_path).as_posix() for f in files] == [
        contract.partition_dir(contract.LATENCY_TABLE, date(2026, 11, 11)),
        contract.partition_dir(contract.BROKER_STATS_TABLE, date(2026, 11, 11)),
        contract.partition_dir(contract.LATENCY_1M_TABLE, date(2026, 11, 11))]  # shutdown: open minute
    assert not list(tmp_path.rglob(".*"))  # no temp file left behind
    latency = pq.read_table(files[0])
    assert latency.schema.equals(contract.LATENCY_SCHEMA)
    assert all(r is None for r in contract.quarantine_reasons(latency, date(2026, 11, 11)))
    sends = [r for r in latency.to_pylist() if r["op"] == "send"]
    for row, hist in zip(sends, recorded, strict=True):
        back = contract.histogram_from_row(row)
        assert back.buckets == hist.buckets and back.count == hist.count
        assert abs(back.max - hist.max) <= 1e-6 and row["bytes"] == 200 * 128
    assert pq.read_table(files[1]).schema.equals(contract.BROKER_STATS_SCHEMA)


def test_minute_rollups_are_written_as_minutes_close_and_equal_their_seconds(tmp_path):
    from heatmap.rollup import rollup_rows

    clock = ManualClock(1_794_355_200.0 + 30)  # half a minute in
    rec = OpRecorder(("send", "pull"), clock)
    writer = MetricsLogWriter(tmp_path, "c1", "b1", roll_s=60)
    rng = np.random.default_rng(1)
    for s in range(100):  # 30 s of one minute, a whole minute, 10 s of the next
        for v in rng.lognormal(-7, 1, 50):
            rec.record("send", float(v), nbytes=64)
        if s % 7 == 0:
            rec.record("pull", float(rng.lognormal(-6, 1)))
        clock.t += 1
        writer.add_seconds(rec.roll())
        if s == 45:  # a periodic roll: only the closed minute goes with it
            files = writer.roll(writer.take())
            assert [f.parent.name for f in files][-1] == "date=2026-11-11"
            assert len(pq.read_table(files[-1])) == 1 + 1  # minute 0: send and pull
    writer.roll()  # shutdown: the open minute as it stands
    day = date(2026, 11, 11)
    seconds = pq.read_table(tmp_path / contract.partition_dir(contract.LATENCY_TABLE, day))
    minutes = pq.read_table(tmp_path / contract.partition_dir(contract.LATENCY_1M_TABLE, day))
    assert minutes.schema.equals(contract.LATENCY_SCHEMA)
    assert all(r is None for r in contract.quarantine_reasons(minutes, day))
    key = lambda r: (r["ts"], r["op"])  # noqa: E731
    assert sorted(minutes.to_pylist(), key=key) == sorted(rollup_rows(seconds.to_pylist()), key=key)
    assert sorted({r["ts"].minute for r in minutes.to_pylist()}) == [0, 1, 2]
    assert sum(minutes.column("count").to_pylist()) == sum(seconds.column("count").to_pylist())


def test_a_warmed_writer_loads_no_module_in_its_first_roll(tmp_path):
    """The first roll runs in a worker thread while the broker's loop serves: a module
    it loads holds the GIL (pandas: 0.15-0.7 s), so warm() loads them at start-up."""
    script = f"""
import sys
from broker_core.observe.metrics_log import MetricsLogWriter
from broker_core.observe.recorder import OpRecorder
from tests.clock import ManualClock

clock = ManualClock(1_794_355_200.0)
rec = OpRecorder(("send",), clock)
writer = MetricsLogWriter({str(tmp_path)!r}, "c1", "b1", roll_s=60)
writer.warm()
before = set(sys.modules)
rec.record("send", 0.001, nbytes=128)
clock.t += 61
closed = rec.roll()
writer.add_seconds(closed)
writer.add_stats(closed[0].ts, 1, 2, 1.0, 0.0, 1, 0)
assert len(writer.roll()) == 3
print(sorted(set(sys.modules) - before))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[3], timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
