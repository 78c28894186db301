"""`floodgate report heatmap`: bad usage is exit 2 and one line, before Spark starts."""

from __future__ import annotations

import pytest

from console.cli import main


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--window", "5x"], "--window: expected a duration"),
        (
            ["--from", "2026-11-11T01:00Z", "--to", "2026-11-11T00:00Z"],
            "--from must be before --to",
        ),
        (["--op", "sned"], "--op: unknown op sned"),
        (["--from", "yesterday"], "--from: not an ISO 8601 time"),
    ],
)
def test_report_heatmap_bad_usage(tmp_path, capsys, extra, message):
    code = main(
        ["report", "heatmap", "--input", str(tmp_path), "--out", str(tmp_path / "o"), *extra]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_report_lists_heatmap(capsys):
    assert main(["report"]) == 2
    assert "heatmap" in capsys.readouterr().out


def test_a_spark_failure_is_one_line_naming_the_jvm_log_and_no_jvm_noise(tmp_path):
    """A fresh process, as a user runs it: the JVM's own stderr (`WARNING: Using incubator
    modules`, log4j, stack traces) goes to a log file that the one-line error names."""
    import os
    import re
    import shutil
    import subprocess
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    from spark_reports.schema import LATENCY_SCHEMA

    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.skip("no Java runtime: run scripts/setup.sh")
    folder = tmp_path / "log" / "latency" / "date=2026-11-11"
    folder.mkdir(parents=True)
    part = folder / "part-0.parquet"
    row = {"ts": 1_794_355_200_000_000, "cluster": "c", "broker": "b", "op": "send", "count": 1,
           "sum_us": 5, "min_us": 5, "max_us": 5, "buckets": [(-140, 1)], "msgs": 1, "bytes": 1}
    pq.write_table(pa.Table.from_pylist([row], schema=LATENCY_SCHEMA), part)  # fmt: skip
    data = bytearray(part.read_bytes())
    data[4:64] = bytes(60)  # the data pages: the footer (schema) still reads
    part.write_bytes(bytes(data))
    env = {k: v for k, v in os.environ.items() if k != "FLOODGATE_DEBUG"}
    env["TMPDIR"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "console.cli", "report", "heatmap", "--input",
         str(tmp_path / "log"), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "WARNING" not in proc.stderr, proc.stderr
    m = re.fullmatch(r"floodgate report: error: .+ \(Spark's log: (\S+)\)", lines[0])
    assert m, lines[0]
    log = tmp_path / os.path.basename(m.group(1))
    assert str(log) == m.group(1)  # in the temp directory, kept after the failure
    assert "Exception" in log.read_text()
    assert not (tmp_path / "out" / "report.html").exists()


@pytest.fixture
def spark_calls(monkeypatch, tmp_path):
    """The reports' Spark jobs replaced by ones that keep what they were handed; the
    working directory is tmp_path, holding a metrics log at ./log."""
    from spark_reports.jobs import capacity, compact, heatmap

    handed: dict[str, object] = {}

    def fake_heatmap(opts):
        handed["heatmap"] = opts
        return {"verdict": {"pass": True}}

    def fake_compact(opts):
        handed["compact"] = opts
        return {"days": []}

    def fake_capacity(args):
        handed["capacity"] = args
        return {"verdict": {"pass": True}}

    monkeypatch.setattr(heatmap, "run_heatmap", fake_heatmap)
    monkeypatch.setattr(compact, "run_compact", fake_compact)
    monkeypatch.setattr(capacity, "run", fake_capacity)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    day = tmp_path / "log" / "latency" / "date=2026-11-11"
    day.mkdir(parents=True)
    (day / "part-0.parquet").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    return handed


@pytest.mark.parametrize("remote", ["flag", "env"])
def test_relative_paths_reach_a_connect_server_as_typed_here(spark_calls, tmp_path,
                                                             monkeypatch, remote):
    """Issue 59: `report heatmap --input log --remote sc://...` sent `log` as typed, and
    the Spark Connect server read its own ./log."""
    if remote == "env":
        monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:15002")
    flag = ["--remote", "sc://127.0.0.1:15002"] if remote == "flag" else []
    assert main(["report", "heatmap", "--input", "log", "--out", "out", *flag, "--json"]) == 0
    opts = spark_calls["heatmap"]
    assert (opts.input, opts.out) == (str(tmp_path / "log"), str(tmp_path / "out"))
    assert main(["report", "compact", "--input", "./log", *flag, "--json"]) == 0
    assert spark_calls["compact"].input == str(tmp_path / "log")
    assert main(["report", "capacity", "--input", "log", "--out", "plan", "--heatmap", "out",
                 "--target-date", "2027-11-11", *flag, "--json"]) == 0
    args = spark_calls["capacity"]
    assert (args.input, args.out, args.heatmap) == tuple(
        str(tmp_path / name) for name in ("log", "plan", "out"))


def test_uris_and_local_runs_keep_their_paths(spark_calls, tmp_path):
    assert main(["report", "heatmap", "--input", "log", "--out", "out", "--json"]) == 0
    assert (spark_calls["heatmap"].input, spark_calls["heatmap"].out) == ("log", "out")
    assert main(["report", "compact", "--input", f"file://{tmp_path}/log", "--remote",
                 "sc://127.0.0.1:15002", "--json"]) == 0
    assert spark_calls["compact"].input == f"file://{tmp_path}/log"
