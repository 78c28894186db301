"""`floodgate gen double11`: writes the log, says what it wrote, refuses bad usage."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from console.cli import main


def test_gen_double11_writes_the_log_and_reports_it_as_json(tmp_path, capsys):
    out = tmp_path / "log"
    code = main(["gen", "double11", "--brokers", "2", "--hours", "0.01", "--out", str(out),
                 "--start", "2026-11-10T23:59:30Z", "--ops", "send,flush", "--json"])  # fmt: skip
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    # latency, latency_1m and broker_stats: a file per table and day (it crosses 00:00)
    assert summary["latency_rows"] == 2 * 36 * 2 and summary["files"] == 6
    table = pq.read_table(out / "latency")
    assert set(table.column("op").to_pylist()) == {"send", "flush"}
    assert table.num_rows == summary["latency_rows"]


def test_gen_double11_bad_usage_exits_2_with_one_line(tmp_path, capsys):
    base = ["gen", "double11", "--out", str(tmp_path / "x")]
    for extra, message in (
        (["--brokers", "0", "--hours", "1"], "--brokers must be >= 1, got 0"),
        (["--brokers", "2", "--hours", "0"], "--hours must be > 0, got 0"),
        (["--brokers", "2", "--hours", "1", "--seed", "-1"], "--seed must be >= 0, got -1"),
        (["--brokers", "2", "--hours", "1", "--ops", "send,nope"], "--ops: unknown op nope"),
        (["--brokers", "2", "--hours", "1", "--start", "soon"], "--start: not an ISO 8601 time"),
        # rough edge 5: no estimate, accepted at any size
        (["--brokers", "100000", "--hours", "1000"], "latency rows, over 2,000,000,000"),
    ):
        try:
            code = main(base + extra)
        except SystemExit as exc:  # a numeric flag's range: refused as the line is read
            code = exc.code
        assert code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0]
    assert not (tmp_path / "x").exists()


def test_gen_double11_refuses_to_overwrite_without_force(tmp_path, capsys):
    args = ["gen", "double11", "--brokers", "1", "--hours", "0.001", "--out", str(tmp_path)]
    assert main(args) == 0
    assert main(args) == 1
    assert "already exists (use --force" in capsys.readouterr().err
    assert main([*args, "--force"]) == 0


def test_gen_double11_short_range_is_centred_on_the_flash_peak(tmp_path, capsys):
    out = tmp_path / "log"
    code = main(["gen", "double11", "--brokers", "1", "--hours", "1", "--out", str(out),
                 "--ops", "send", "--json"])  # fmt: skip
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["start"], summary["end"], summary["peak"]) == (
        "2026-11-10T23:30:00+00:00", "2026-11-11T00:30:00+00:00", "2026-11-11T00:00:00+00:00"
    )
    ts = pq.read_table(out / "latency").column("ts").to_pylist()
    assert (min(ts).isoformat(), max(ts).isoformat()) == (
        "2026-11-10T23:30:00+00:00", "2026-11-11T00:29:59+00:00"
    )
    # --start still wins, and the text output says where the peak is
    code = main(["gen", "double11", "--brokers", "1", "--hours", "0.01", "--out", str(out),
                 "--start", "2026-11-11T02:00:00Z", "--force"])  # fmt: skip
    assert code == 0
    text = capsys.readouterr().out.splitlines()[1]
    assert text == (
        "  2026-11-11 02:00:00 .. 2026-11-11 02:00:36 UTC, no flash peak inside; "
        "next at 2026-11-12 00:00 UTC"
    )


def test_sigterm_leaves_nothing_half_written_and_the_next_run_starts(tmp_path):
    """Rough edge 5: SIGTERM left a hidden 193 MB `.part-00000.parquet.inprogress` and the
    next run refused (`latency already exists`); Ctrl-C and SIGTERM now remove the
    partial tables."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "night"
    argv = [sys.executable, "-m", "console.cli", "gen", "double11", "--brokers", "200",
            "--hours", "24", "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(out.rglob("*.inprogress")) and time.monotonic() < deadline:
        time.sleep(0.05)  # until it is writing
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    assert proc.returncode == 130, proc.stderr
    assert not [p for p in out.rglob("*") if p.is_file()]  # nothing, hidden or not
    assert main(["gen", "double11", "--brokers", "1", "--hours", "0.001", "--out",
                 str(out), "--json"]) == 0
