"""`floodgate report capacity` parser (wired by report_cmd through add_capacity_parser)."""

from __future__ import annotations

import pytest

from capacity.errors import CapacityError
from console.cli import Parser
from console.commands.report_capacity import add_capacity_parser
from spark_reports.errors import ReportError


def parse(*argv):
    root = Parser(prog="floodgate report")
    add_capacity_parser(root.add_subparsers(dest="command", parser_class=Parser))
    return root.parse_args(list(argv))


def test_options_and_defaults():
    args = parse("capacity", "--input", "LOG", "--out", "OUT", "--target-date", "2027-11-11")
    assert args.func.__module__ == "console.commands.report_capacity"
    assert (args.history, args.load_test, args.master, args.op) == (None, None, None, "send")
    assert args.sla_rate == 10e6


def test_missing_required_option_is_usage_error():
    with pytest.raises(SystemExit) as exc:
        parse("capacity", "--input", "LOG", "--out", "OUT")
    assert exc.value.code == 2


def test_bad_inputs_fail_before_spark_starts(tmp_path):
    args = parse("capacity", "--input", "LOG", "--out", str(tmp_path), "--target-date", "11/11")
    with pytest.raises(ReportError, match="YYYY-MM-DD"):
        args.func(args)
    args = parse("capacity", "--input", "LOG", "--out", str(tmp_path), "--target-date",
                 "2027-11-11", "--history", str(tmp_path / "none.csv"))  # fmt: skip
    with pytest.raises(CapacityError, match="cannot read history"):
        args.func(args)
