"""An operator's commands that change a cluster are written to its events log with their
outcome; what only reads is not."""

from __future__ import annotations

import pytest

from broker_core.observe.events import read_events
from console.cli import main
from console.command_events import kind_of


@pytest.mark.parametrize("argv, kind", [
    (["offsets", "reset", "--group", "g"], "offsets"),
    (["--debug", "quota", "set", "--topic", "t"], "quota"),
    (["fault", "inject", "--broker", "b"], "fault"),
    (["acl", "user", "add", "ops"], "command"),
    (["drill", "failover", "--cluster", "c"], "drill"),
    (["acl", "user", "list"], None),
    (["offsets", "show", "--group", "g"], None),
    (["status", "--cluster", "c"], None),
    (["fault", "show"], None),
])
def test_which_commands_change_a_cluster(argv, kind):
    assert kind_of(argv[1] if argv[0] == "--debug" else argv[0], argv) == kind


def test_a_failed_fault_injection_is_in_the_events_log_with_its_exit(tmp_path, capsys):
    (tmp_path / "cluster.toml").write_text(
        '[[broker]]\nname = "broker-1"\naddr = "127.0.0.1:9"\nhttp = "127.0.0.1:19"\n')
    argv = ["fault", "clear", "--broker", "broker-1", "--cluster", str(tmp_path / "cluster.toml")]
    assert main(argv) == 1  # nothing listens there
    capsys.readouterr()
    [event] = read_events(tmp_path)
    assert event["kind"] == "fault" and event["source"] == "command"
    assert event["text"] == f"floodgate {' '.join(argv)}: failed (exit 1)"
    assert event["exit"] == 1 and event["severity"] == "warning"
    main(["fault", "show", "--cluster", str(tmp_path / "cluster.toml")])
    capsys.readouterr()
    assert len(read_events(tmp_path)) == 1  # `show` only reads: not written


def test_what_a_drill_measured_rides_its_event(tmp_path):
    import argparse

    from console.command_events import record

    (tmp_path / "cluster.toml").write_text("")
    args = argparse.Namespace(command="drill", cluster=str(tmp_path / "cluster.toml"),
                              event_fields={"lost": 0, "duplicated": 2, "failover_s": 0.412})
    record(args, ["drill", "failover", "--cluster", args.cluster], 0)
    [event] = read_events(tmp_path)
    assert (event["kind"], event["lost"], event["duplicated"]) == ("drill", 0, 2)
    assert event["text"].endswith(": done (lost 0, duplicated 2, failover 0.412 s)")
