"""A report's input checked before Spark: a missing or empty log, a range or target date
outside the log's days, a non-empty output directory (unless --force), each one line,
exit 2, in well under a second through the CLI (no JVM started)."""

from __future__ import annotations

import time
from datetime import date, datetime

import pytest

from console.cli import main
from spark_reports.errors import ReportError
from spark_reports.preflight import check_input, check_out, check_range, check_target_date


def fake_log(root, days=("2026-11-10", "2026-11-11")):
    for d in days:
        part = root / "latency" / f"date={d}"
        part.mkdir(parents=True)
        (part / "part-0.parquet").write_bytes(b"x")
    (root / "latency" / "date=2026-11-12").mkdir()  # empty: not a day of the log
    return root


def test_the_days_of_a_log_and_its_missing_or_empty_cases(tmp_path):
    assert check_input(str(fake_log(tmp_path / "log"))) == {date(2026, 11, 10),
                                                            date(2026, 11, 11)}
    with pytest.raises(ReportError, match="no such directory"):
        check_input(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="no metrics log at"):
        check_input(str(tmp_path / "empty"))
    assert check_input("hdfs://namenode/log") is None  # Spark's to read


def test_a_data_directory_given_as_the_log_is_told_where_its_log_is(tmp_path):
    fake_log(tmp_path / "cluster" / "metrics")  # `cluster up --data cluster`
    with pytest.raises(ReportError, match=f"its metrics log is {tmp_path}/cluster/metrics$"):
        check_input(str(tmp_path / "cluster"))
    for name in ("broker-1", "broker-2"):  # brokers each with a log of their own
        fake_log(tmp_path / "old" / name / "metrics")
    with pytest.raises(ReportError, match=r"logs are in .*/old/NAME/metrics \(broker-1, "
                                          r"broker-2\): give one, or merge them .*: cp -r "):
        check_input(str(tmp_path / "old"))


def test_a_range_and_a_target_date_against_the_log(tmp_path):
    days = check_input(str(fake_log(tmp_path / "log")))
    check_range(days, datetime(2026, 11, 11, 20), None)
    with pytest.raises(ReportError, match="hold none of the log's days"):
        check_range(days, datetime(2026, 11, 13), datetime(2026, 11, 14))
    check_target_date(days, date(2027, 11, 11))
    with pytest.raises(ReportError, match="before the log's first day"):
        check_target_date(days, date(2020, 11, 11))


def test_a_non_empty_output_needs_force(tmp_path):
    check_out(str(tmp_path / "new"), False)
    (tmp_path / "out").mkdir()
    check_out(str(tmp_path / "out"), False)
    (tmp_path / "out" / "report.html").write_text("old")
    with pytest.raises(ReportError, match="not empty"):
        check_out(str(tmp_path / "out"), False)
    check_out(str(tmp_path / "out"), True)


@pytest.mark.parametrize("argv, message", [
    (["report", "heatmap", "--input", "{empty}", "--out", "{out}"], "no metrics log at"),
    (["report", "capacity", "--input", "{log}", "--out", "{out}", "--target-date",
      "2020-11-11"], "before the log's first day"),
    (["report", "capacity", "--input", "{log}", "--out", "{full}", "--target-date",
      "2027-11-11"], "not empty"),
    (["report", "heatmap", "--input", "{log}", "--out", "{out}", "--from",
      "2026-12-01T00:00:00"], "hold none of the log's days"),
])
def test_bad_input_is_one_line_and_fast_through_the_cli(tmp_path, capsys, argv, message):
    log = fake_log(tmp_path / "log")
    (tmp_path / "empty").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "capacity.json").write_text("{}")
    paths = {"log": log, "empty": tmp_path / "empty", "out": tmp_path / "out",
             "full": tmp_path / "full"}
    t0 = time.monotonic()
    code = main([a.format(**paths) for a in argv])
    took = time.monotonic() - t0
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert took < 1.0, took
