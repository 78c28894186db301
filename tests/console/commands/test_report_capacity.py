"""`floodgate report capacity` parser (wired by report_cmd through add_capacity_parser)."""

from __future__ import annotations

import pytest

from capacity.errors import CapacityError
from console.cli import Parser
from console.commands.report_capacity import add_capacity_parser
from console.errors import UsageError


def parse(*argv):
    root = Parser(prog="floodgate report")
    add_capacity_parser(root.add_subparsers(dest="command", parser_class=Parser))
    return root.parse_args(list(argv))


def test_options_and_defaults():
    args = parse("capacity", "--input", "LOG", "--out", "OUT", "--target-date", "2027-11-11")
    assert args.func.__module__ == "console.commands.report_capacity"
    assert (args.history, args.load_test, args.master, args.op) == (None, None, None, "send")
    assert args.sla_rate is None  # the cluster's own forecast peak (mid)


def test_the_double_11_sla_is_an_example_not_the_default(capsys):
    from console.cli import main

    args = parse("capacity", "--input", "LOG", "--out", "OUT", "--target-date", "2027-11-11",
                 "--target-rate", "10000000")
    assert args.sla_rate == 10e6  # --target-rate is --sla-rate's other name
    with pytest.raises(SystemExit):
        main(["report", "capacity", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default: the cluster's own forecast peak, mid band" in text
    assert "--target-rate 10000000, the figure of Alibaba's Double-11 2016 RocketMQ talk" in text


def test_missing_required_option_is_usage_error():
    with pytest.raises(SystemExit) as exc:
        parse("capacity", "--input", "LOG", "--out", "OUT")
    assert exc.value.code == 2


def test_bad_inputs_fail_before_spark_starts(tmp_path):
    args = parse("capacity", "--input", "LOG", "--out", str(tmp_path), "--target-date", "11/11")
    with pytest.raises(UsageError, match="YYYY-MM-DD"):
        args.func(args)
    log = tmp_path / "log" / "latency" / "date=2026-11-11"  # past the pre-flight's look
    log.mkdir(parents=True)
    (log / "part-0.parquet").write_bytes(b"x")
    args = parse("capacity", "--input", str(tmp_path / "log"), "--out", str(tmp_path / "out"),
                 "--target-date", "2027-11-11", "--history", str(tmp_path / "none.csv"))
    with pytest.raises(CapacityError, match="cannot read history"):
        args.func(args)


@pytest.mark.parametrize("report", ["capacity", "heatmap"])
def test_help_says_fail_exits_1_in_both_reports(capsys, report):
    from console.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["report", report, "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "0 on PASS (or no data to judge), 1 on FAIL (the outputs are written either way)" in text
    assert "2 on bad usage (nothing started)" in text


def _quiet_log(root) -> None:
    """Three brokers, two minutes of sends at 0.5 ms: a log that passes every latency check."""
    from datetime import UTC, datetime, timedelta

    import pyarrow as pa
    import pyarrow.parquet as pq

    from spark_reports.schema import LATENCY_SCHEMA

    start = datetime(2026, 11, 11, 0, 0, tzinfo=UTC)
    rows = [
        {"ts": start + timedelta(seconds=s), "cluster": "trade", "broker": f"b{i}", "op": "send",
         "count": 1000, "sum_us": 500_000, "min_us": 480, "max_us": 520,
         "buckets": [(-88, 1000)], "msgs": 1000, "bytes": 1_000_000}
        for s in range(120) for i in range(3)
    ]  # fmt: skip
    folder = root / "latency" / "date=2026-11-11"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=LATENCY_SCHEMA), folder / "part-0.parquet")


def test_exit_0_on_pass_1_on_fail_reports_written_either_way_with_the_umask(
    spark, tmp_path, capsys
):
    import json
    import os
    import stat

    from console.cli import main

    _quiet_log(tmp_path / "log")
    base = ["report", "capacity", "--input", str(tmp_path / "log"), "--target-date",
            "2026-11-11", "--per-broker-rate", "1e6", "--disk-tb", "100"]  # fmt: skip

    def run(out, mask, *extra):
        saved = os.umask(mask)
        try:
            code = main([*base, "--out", str(tmp_path / out), *extra])
        finally:
            os.umask(saved)
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in [tmp_path / out,
                 *(tmp_path / out).iterdir()]}  # fmt: skip
        return code, capsys.readouterr(), modes

    code, io, modes = run("pass", 0o022, "--sla-rate", "1000")
    assert code == 0 and io.out.startswith("PASS: ")
    assert modes == {"pass": 0o755, "capacity.json": 0o644, "report.html": 0o644}

    code, io, modes = run("fail", 0o077, "--sla-rate", "1e9", "--json")  # carries 10^9/s: no
    assert code == 1 and io.err == ""
    verdict = json.loads(io.out)
    assert verdict["pass"] is False
    assert [c["pass"] for c in verdict["checks"]] == [False, True, True, True]
    assert modes == {"fail": 0o700, "capacity.json": 0o600, "report.html": 0o600}


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["--utilisation", "2"], "--utilisation must be within (0, 1], got 2"),
     (["--sla-rate", "-1e7"], "--sla-rate must be > 0, got -1e+07"),
     (["--per-broker-rate", "0"], "--per-broker-rate must be > 0, got 0"),
     (["--replicas", "0"], "--replicas must be >= 1, got 0"),
     (["--disk-tb", "nan"], "--disk-tb must be > 0, got nan")],
)  # fmt: skip
def test_out_of_range_options_are_usage_errors_before_spark_starts(
    tmp_path, capsys, extra, message
):
    from console.cli import main

    code = main(["report", "capacity", "--input", str(tmp_path / "none"), "--out",
                 str(tmp_path / "out"), "--target-date", "2027-11-11", *extra])  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err == f"floodgate report: error: {message}\n"
    assert not (tmp_path / "out").exists()


def test_the_summary_names_the_binding_broker_and_the_forecast_bound(monkeypatch, capsys):
    """The command's own lines, on a plan made without Spark (the job is stood in for)."""
    from spark_reports import preflight
    from spark_reports.capacity_report.plan import build_plan
    from spark_reports.jobs import capacity as job
    from tests.spark_reports.capacity_report.test_plan import measured, options

    m = measured()
    m["disk"] = [{"broker": "b1", "disk_total_bytes": 8e12, "hours_to_water": 6.0}]
    plan = build_plan(m, options(per_broker_rate=1e6))
    monkeypatch.setattr(job, "run", lambda args: plan)
    monkeypatch.setattr(preflight, "check_input", lambda path: [])
    monkeypatch.setattr(preflight, "check_target_date", lambda days, target: None)
    monkeypatch.setattr(preflight, "check_out", lambda out, force: None)
    args = parse("capacity", "--input", "LOG", "--out", "OUT", "--target-date", "2027-11-11")
    assert args.func(args) == 1  # b1 runs at 90 %: the forecast peak needs more brokers
    out = capsys.readouterr().out
    assert out.startswith("FAIL: forecast peak 900,000 .. 900,000 msgs/s (mid 900,000)")
    assert "warning: the forecast runs 11 years beyond" in out and "stops growing at 2020" in out
    assert "carries 900,000 msgs/s (the cluster's forecast peak, mid) with 30% isolated" in out
    assert "at risk: 1 of 2 brokers; b1 binds (12.0x past its line: disk at 75% water" in out
