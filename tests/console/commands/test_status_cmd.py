"""`floodgate status` (table, --json, exit codes), the console's config order,
and usage checks of the demo and other commands (one line, exit 2)."""

from __future__ import annotations

import argparse
import json
import socket
import tempfile
import time
from pathlib import Path

import pytest

from console.cli import main
from console.config import config_from_args
from console.errors import UsageError

DATA = Path(__file__).parents[1] / "recorded" / "demo"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_status_json_from_a_recording_is_degraded(capsys):
    rc, out, _ = run(capsys, "status", "--replay", str(DATA), "--json")
    data = json.loads(out)
    assert rc == 1 and data["healthy"] is False  # one broker is isolated by the fuse
    states = {b["name"]: b["state"] for b in data["brokers"]}
    excluded = data["producers"][0]["excluded"]
    assert len(excluded) == 1 and states[excluded[0]] == "ISOLATED"
    assert list(states.values()).count("UP") == 5 and data["summary"]["cap"] == 1
    assert data["summary"]["isolated"] == 1  # excluded, as the header counts (overflow apart)
    assert any("at its cap" in a for a in data["alerts"])


def test_status_table(capsys):
    rc, out, _ = run(capsys, "status", "--replay", str(DATA))
    assert rc == 1
    assert "broker-3  ISOLATED" in out and "fuse of demo: slow" in out
    # one count: 1 excluded against the cap of 1, the 3 earliest isolated serving as overflow
    assert "excluded 1/1 +3 overflow" in out
    assert "fuse: broker-3 isolated 00:34:26 for slowness, 54 s left; cap 1 of 6 brokers full;" \
        " broker-2, broker-1, broker-4 slow, serving as overflow" in out
    assert "fuse of demo: 1 excluded, at its cap of 1; 3 more isolated serve as overflow" in out


@pytest.mark.integration
def test_status_live_cluster_and_an_unreachable_broker(cluster3, capsys):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    rc, out, _ = run(capsys, "status", "--cluster", str(cluster3.path), "--json")
    data = json.loads(out)
    assert [b["name"] for b in data["brokers"]] == ["broker-1", "broker-2", "broker-3"]
    assert rc == (0 if all(b["state"] == "UP" for b in data["brokers"]) else 1)
    live = cluster3.file.brokers[0].http
    rc, out, _ = run(capsys, "status", "--brokers", f"{live},ghost={dead}", "--json")
    data = json.loads(out)
    assert rc == 1
    ghost = data["brokers"][1]
    assert ghost["name"] == "ghost" and ghost["state"] == "DOWN"
    assert ghost["reason"] == "connection refused"


@pytest.mark.integration
def test_a_broker_failing_every_send_is_failing_and_status_exits_1(tmp_path, capsys):
    """Such a broker answered /stats at once and read UP, `healthy: true`, exit 0; only an
    alert counted its errors. A broker refusing a client's oversize message stays UP."""
    from broker_core.client.attempts import SendFailed
    from broker_core.client.producer import Producer
    from broker_core.cluster.launcher import Cluster
    from broker_core.cluster.ports import free_port_range

    cluster = Cluster(2, free_port_range(4), tmp_path)
    cluster.up()
    try:
        bad, good = cluster.file.brokers
        rc, _, err = run(capsys, "fault", "inject", "--broker", bad.http, "--error-rate", "1")
        assert rc == 0, err
        for addr, body, sends in ((bad.addr, b"x", 20), (good.addr, b"x" * (4 << 20 | 1), 1)):
            with Producer([addr], fuse=False, retries=0) as producer:
                for _ in range(sends):
                    with pytest.raises(SendFailed):
                        producer.send("orders", body)
        deadline = time.monotonic() + 10  # the sends' second closes, then a tick's snapshot
        while True:
            rc, out, _ = run(capsys, "status", "--cluster", str(cluster.path), "--json")
            data = json.loads(out)
            rows = {b["name"]: b for b in data["brokers"]}
            if rows[bad.name]["send_failures"] and rows[good.name]["send_errors"] or \
                    time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert rc == 1 and data["healthy"] is False
        row = rows[bad.name]
        assert (row["state"], row["send_failures"], row["last_failure"]) == (
            "FAILING", 20, "SYSTEM_ERROR: injected error")
        assert row["reason"] == "failed 20 of 20 sends (10 s), latest SYSTEM_ERROR: injected " \
                                "error"
        assert (rows[good.name]["state"], rows[good.name]["send_failures"]) == ("UP", 0)
        assert f"{bad.name} failed 20 sends itself (10 s), latest SYSTEM_ERROR: injected " \
               "error" in data["alerts"]
        refused = [a for a in data["alerts"] if a.startswith(f"{good.name} refused 1 send")]
        assert refused == [f"{good.name} refused 1 send (10 s), latest MESSAGE_TOO_LARGE: "
                           f"body of {4 << 20 | 1} bytes is over the {4 << 20}-byte limit "
                           "(since start: MESSAGE_TOO_LARGE 1)"], data["alerts"]
        assert rows[good.name]["last_refusal"].startswith("MESSAGE_TOO_LARGE: body of")
        rc, out, _ = run(capsys, "status", "--cluster", str(cluster.path))
        assert rc == 1 and f"{bad.name}  FAILING" in out
    finally:
        cluster.down(grace=3)


@pytest.mark.parametrize("argv,message", [
    (["status", "--brokers", "nonsense"], "bad broker address"),
    (["status", "--brokers", "a:1", "--json", "--cluster", "x"], "not allowed with"),
    (["demo", "--json"], "--json needs --headless"),
    (["demo", "--brokers", "0"], "at least 1"),
    (["demo", "--base-port", "65530"], "--base-port"),
    # rough edges 6 and 9: an overflow, a flag not named, a directory silently ignored
    (["capacity", "size", "--target-rate", "1e300", "--per-broker-rate", "1e-300"],
     "needs more than 10,000,000 brokers"),
    (["bench", "produce", "--brokers", "127.0.0.1:1", "--rate", "-5", "--duration", "1"],
     "--rate must be > 0, got -5"),
    # every send failed "127.0.0.1:1: " (asyncio's timeout has no words)
    (["bench", "produce", "--brokers", "127.0.0.1:1", "--timeout", "0", "--count", "1"],
     "--timeout must be > 0, got 0"),
    # a start in milliseconds would have waited 50,000 years
    (["bench", "produce", "--brokers", "127.0.0.1:1", "--start-at", "1795825000000",
      "--count", "1"], "--start-at 1795825000000 is more than a day away"),
    # rough edge 7: a bad topic name and a system topic, refused before any send
    (["bench", "produce", "--brokers", "127.0.0.1:1", "--topic", "bad topic!", "--count", "1"],
     "--topic: illegal topic name 'bad topic!': 1-127 of letters"),
    (["bench", "produce", "--brokers", "127.0.0.1:1", "--topic", "%TRACE%", "--count", "1"],
     "--topic %TRACE%: a system topic"),
    # it named the temporary file it could not make ('/nonexistent/dir/.x.json.tmp')
    (["grafana", "dashboard", "--out", "/nonexistent/dir/x.json"],
     "--out /nonexistent/dir/x.json: no directory /nonexistent/dir"),
    (["tune", "plan", "--profile-dir", "/nonexistent"],
     "--profile-dir /nonexistent: no such directory"),
    # a segment the store cannot map: said before any broker starts (it "exited with 2");
    # a --data no one can make, so that a regression writes nothing on the host
    (["cluster", "up", "--brokers", "1", "--segment-size", "5000", "--data", "/dev/null/fg"],
     "--segment-size must be a positive multiple of 4K, got '5000'"),
    (["broker", "serve", "--name", "b", "--data", "/dev/null/fg", "--segment-size", "0"],
     "--segment-size must be a positive multiple of 4K, got '0'"),
])
def test_usage_errors_exit_2(capsys, argv, message):
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own checks exit from parse_args
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and message in err and err.count("\n") == 1


@pytest.mark.parametrize("command", [["cluster", "up", "--brokers", "1"],
                                     ["broker", "serve", "--name", "b"]])
def test_a_data_dir_that_cannot_be_made_is_one_line_naming_it(capsys, tmp_path, command):
    blocker = tmp_path / "file"
    blocker.write_text("")  # a file where a directory's parent should be
    rc, _, err = run(capsys, *command, "--data", str(blocker / "data"))
    assert rc == 1 and f"--data {blocker / 'data'}: cannot make it: Not a directory" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("command, said", [
    # it named the temporary file ('/proc/.fg-out.tmp'), not the one asked for
    (["grafana", "dashboard"], "--out /proc/fg-out: cannot write it: "),
    # it said "[Errno 2] No such file or directory: '/proc/fg-out'"
    (["certs", "make"], "--out /proc/fg-out: cannot write the certificates there: ")])
def test_an_out_that_cannot_be_written_is_one_line_naming_it(capsys, command, said):
    """A directory that takes no new file or directory (/proc here)."""
    rc, _, err = run(capsys, *command, "--out", "/proc/fg-out")
    assert rc == 1 and said in err and ".tmp" not in err and err.count("\n") == 1


def test_no_source_is_a_usage_error(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./cluster.toml here
    monkeypatch.delenv("FLOODGATE_BROKERS", raising=False)
    monkeypatch.delenv("FLOODGATE_CLUSTER", raising=False)
    rc, _, err = run(capsys, "status")
    assert rc == 2 and "no brokers" in err


def test_config_order_flags_then_env_then_defaults():
    env = {"FLOODGATE_BROKERS": "e=127.0.0.1:9", "FLOODGATE_REFRESH": "2.5",
           "FLOODGATE_PRODUCERS": "127.0.0.1:7"}
    flags = argparse.Namespace(brokers="f=127.0.0.1:8", refresh=None, producers=None)
    cfg = config_from_args(flags, env)
    assert cfg.brokers == [("f", "127.0.0.1:8")]  # the flag wins
    assert cfg.refresh == 2.5 and cfg.producers == ["127.0.0.1:7"]  # env fills the rest
    assert cfg.down_after == 2 and cfg.host_profile == "broker"  # defaults
    cfg = config_from_args(argparse.Namespace(), env)
    assert cfg.brokers == [("e", "127.0.0.1:9")]
    with pytest.raises(UsageError, match="not a number"):
        config_from_args(argparse.Namespace(), {**env, "FLOODGATE_REFRESH": "soon"})


def test_a_cluster_file_gives_the_brokers_and_their_groups(tmp_path):
    from broker_core.cluster.cluster_file import BrokerEntry, ClusterFile

    ClusterFile("c", [BrokerEntry("g1-a", "127.0.0.1:1", "127.0.0.1:2", group="g1", ha="h:1"),
                      BrokerEntry("g1-b", "127.0.0.1:3", "127.0.0.1:4", group="g1", ha="h:2"),
                      BrokerEntry("solo", "127.0.0.1:5", "127.0.0.1:6")],
                zk="127.0.0.1:7", replication="sync").save(tmp_path / "c.toml")
    cfg = config_from_args(argparse.Namespace(cluster=str(tmp_path / "c.toml")), {})
    assert cfg.brokers == [("g1-a", "127.0.0.1:2"), ("g1-b", "127.0.0.1:4"),
                           ("solo", "127.0.0.1:6")]
    assert cfg.groups == {"g1-a": "g1", "g1-b": "g1"}  # availability counts g1 once

def test_demo_refuses_a_port_in_use(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where its log would be made
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        rc, _, err = run(capsys, "demo", "--headless", "1", "--brokers", "1",
                         "--base-port", str(port))
    assert rc == 1 and "in use" in err and err.count("\n") == 2  # the start line + one error
    assert not list(tmp_path.glob("floodgate-demo-*"))  # nothing started: nothing left



def test_a_data_port_given_for_an_http_one_and_back_is_said_in_words(cluster3, capsys):
    """Rough edge 1: `status` and `fault inject` on a broker's data port printed
    `BadStatusLine` with raw control bytes; `bench produce` on its HTTP port said only
    `SendFailed`. Each now names the port to use, on one line, exit non-zero."""
    entry = cluster3.file.brokers[0]
    rc, out, _ = run(capsys, "status", "--brokers", entry.addr, "--json")
    assert rc == 1
    reason = json.loads(out)["brokers"][0]["reason"]
    assert "not an HTTP port" in reason and "HTTP port" in reason
    rc, out, err = run(capsys, "fault", "inject", "--broker", entry.addr, "--error-rate", "0.5",
                       "--duration", "1")
    assert rc == 1 and "not an HTTP port" in err and "\x00" not in err
    rc, out, err = run(capsys, "bench", "produce", "--brokers", entry.http, "--rate", "20",
                       "--duration", "0.3")
    assert rc != 0 and "that is a broker's HTTP port; give its data (TCP) port" in out + err
