"""Issue 59, one rule for numeric flags: every numeric flag of every subcommand refuses 0
where 0 makes no sense, negatives and values out of its range by name, exit 2, in one
line, as the command line is read: nothing made, nothing started."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from console.cli import build_parser, main
from console.commands.common import Bounded

# Numeric flags with no Bounded type, each for a reason; any other fails the guard below.
NOT_BOUNDED = {
    ("offsets reset", "--by"): "negative moves back; 0 is refused when run",
}
NOT_WALKED = {"demo"}  # demo_cmd checks its own flags (`_check`): the demo's work
# Flags a command checks itself before anything else, run with these arguments.
RUN_CHECKED = {
    "report capacity": ["--input", "no-log", "--out", "no-out", "--target-date", "2027-11-11"],
}


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, child in action.choices.items():
                if id(child) not in seen and name not in NOT_WALKED:  # aliases: once
                    seen.add(id(child))
                    yield from _parsers(child, (*path, name))


def _numeric_flags():
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if action.option_strings and (isinstance(action.type, Bounded)
                                          or action.type in (int, float)):
                yield " ".join(path), action.option_strings[0], action, parser


FLAGS = list(_numeric_flags())


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's refusals exit from parse_args
        return exc.code


def test_the_walk_finds_the_flags():
    """A guard that walks nothing guards nothing."""
    found = {(command, flag) for command, flag, _, _ in FLAGS}
    assert {("cluster up", "--brokers"), ("broker serve", "--port"), ("spark up", "--port"),
            ("bench produce", "--realtime"), ("report capacity", "--sla-rate"),
            ("capacity size", "--spares"), ("offsets reset", "--by")} <= found
    assert ("bench produce", "--topic") not in found and len(FLAGS) > 60


@pytest.mark.parametrize(("command", "flag", "action", "parser"), FLAGS,
                         ids=[f"{c} {f}" for c, f, _, _ in FLAGS])
def test_every_numeric_flag_refuses_minus_one_by_name(capsys, command, flag, action, parser):
    if (command, flag) in NOT_BOUNDED:
        pytest.skip(NOT_BOUNDED[(command, flag)])
    ranges = parser.get_default("_ranges") or {}
    if action.dest in ranges:  # common.number: checked by `checked` before the command runs
        assert not ranges[action.dest][1].contains(-1)
        assert hasattr(parser.get_default("func"), "__wrapped__"), "run not wrapped in checked"
        return
    if command in RUN_CHECKED:
        argv = [*command.split(), *RUN_CHECKED[command], flag, "-1"]
    else:
        assert isinstance(action.type, Bounded), (
            f"{command} {flag}: type={action.type!r}: give it a type of console.commands.common "
            "(positive_int, port, int_range(...), ...) or say why not in NOT_BOUNDED")
        argv = [*command.split(), flag, "-1"]
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{flag} must be " in err and "got -1" in err, err


@pytest.mark.parametrize(("argv", "said"), [
    (["cluster", "up", "--brokers", "0"], "--brokers must be within [1, 64], got 0"),
    (["cluster", "up", "--groups", "2", "--replicas", "0"],
     "--replicas must be within [1, 5], got 0"),
    (["cluster", "up", "--base-port", "70000"],
     "--base-port must be within [1024, 65535], got 70000"),
    (["broker", "serve", "--name", "b", "--data", "D", "--port", "0"],
     "--port must be within [1, 65535], got 0"),
    (["broker", "serve", "--name", "b", "--data", "D", "--http-port", "65536"],
     "--http-port must be within [1, 65535], got 65536"),
    (["broker", "serve", "--name", "b", "--data", "D", "--queues", "0"],
     "--queues must be within [1, 1024], got 0"),
    (["spark", "status", "--port", "0"], "--port must be within [1, 65535], got 0"),
    (["bench", "produce", "--brokers", "127.0.0.1:9", "--count", "0"],
     "--count must be >= 1, got 0"),
    (["bench", "produce", "--brokers", "127.0.0.1:9", "--duration", "nan"],
     "--duration must be a finite number, got nan"),
    (["bench", "produce", "--brokers", "127.0.0.1:9", "--count", "1.5"],
     "--count must be a whole number, got '1.5'"),
    (["bench", "produce", "--brokers", "127.0.0.1:9", "--count", "1", "--trace-rate", "2"],
     "--trace-rate must be within [0, 1], got 2"),
    (["fuse", "simulate", "--scenario", "all", "--policy", "all", "--brokers", "0"],
     "--brokers must be within [1, 10000], got 0"),
    (["heatmap", "show", "--broker", "127.0.0.1:9", "--seconds", "301"],
     "--seconds must be within [1, 300], got 301"),
    (["controller", "--zk", "h:1", "--session-timeout", "0"],
     "--session-timeout must be within [0.2, 60], got 0"),
    (["drill", "failover", "--cluster", "c.toml", "--size", "5000000"],
     "--size must be within [24, 4194304], got 5000000"),
])  # fmt: skip
def test_zero_and_out_of_range_refused_before_anything_is_made(
        capsys, tmp_path, monkeypatch, argv, said):
    monkeypatch.chdir(tmp_path)  # `cluster up` made ./floodgate-data for --brokers 0
    data = tmp_path / "data"
    assert _exit_code([str(data) if a == "D" else a for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err
    assert list(tmp_path.iterdir()) == []


def test_cluster_up_with_no_brokers_starts_none(tmp_path):
    """`floodgate cluster up --brokers 0` started 3 brokers and wrote ./floodgate-data."""
    proc = subprocess.run([sys.executable, "-m", "console.cli", "cluster", "up", "--brokers",
                           "0"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("floodgate cluster up: error: --brokers must be within [1, 64], "
                           "got 0 (see --help)\n")
    assert list(tmp_path.iterdir()) == []


def test_zero_where_it_means_none_is_taken_and_said_in_help():
    args = build_parser().parse_args(["bench", "produce", "--brokers", "b:1", "--count", "1",
                                      "--flow-retries", "0", "--size", "0", "--linger-ms", "0"])
    assert (args.flow_retries, args.size, args.linger_ms) == (0, 0, 0.0)
    helps = {(command, flag): action.help for command, flag, action, _ in FLAGS}
    for flag in ("--stall-ms", "--latency-ms", "--error-rate", "--pause"):
        assert "0: none" in helps[("fault inject", flag)]
    assert "0: never" in helps[("bench produce", "--flow-retries")]
    assert "0: none" in helps[("topic list", "--hottest")]
    assert "(0: no limit)" in helps[("broker serve", "--max-mapped-queues")]
