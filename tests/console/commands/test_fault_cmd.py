"""`floodgate fault`: drills say what they set in words a person reads at a glance."""

from __future__ import annotations

import json
import re

import pytest

from broker_core.cluster.ports import free_port_range
from console.cli import main
from console.fault_words import describe, duration


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0 s"), (3.205000211892184e-06, "3.21 µs"), (0.0125, "12.5 ms"), (0.8, "800 ms"),
     (0.9996, "1 s"), (0.0009997, "1 ms"),
     (5, "5 s"), (59.96, "1 min"), (125.4, "2 min 5 s"), (5400, "1 h 30 min")],
)  # fmt: skip
def test_durations_read_at_a_glance(seconds, text):
    assert duration(seconds) == text


def test_describe_names_each_fault_with_units():
    state = {"active": True, "latency_ms": 0.0, "stall_ms": 800.0, "stall_every_s": 5.0,
             "stall_random": True, "error_rate": 0.025, "pause_s": 0.0, "duration_s": 60.0,
             "since_s": 3.205000211892184e-06, "remaining_s": 59.999996794999788}  # fmt: skip
    assert describe(state) == (
        "fault active: random stalls up to 800 ms every 5 s, errors 2.5 %, "
        "clears after 1 min (1 min left)"
    )
    assert describe({"active": True, "latency_ms": 2.5, "pause_s": 1.5, "since_s": 90.0}) == (
        "fault active for 1 min 30 s: latency +2.5 ms, pause 1.5 s"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["--error-rate", "2"], "--error-rate must be within [0, 1], got 2"),
     (["--latency-ms", "-5"], "--latency-ms must be >= 0, got -5"),
     (["--pause", "1", "--duration", "-1e3"], "--duration must be > 0, got -1e3")],
)  # fmt: skip
def test_out_of_range_flags_are_refused_before_calling_the_broker(capsys, extra, message):
    with pytest.raises(SystemExit) as exc:  # refused as the command line is read
        main(["fault", "inject", "--broker", "127.0.0.1:9", *extra])
    assert exc.value.code == 2
    assert capsys.readouterr().err == f"floodgate fault inject: error: {message} (see --help)\n"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from broker_core.cluster.launcher import Cluster

    cluster = Cluster(1, free_port_range(2), tmp_path_factory.mktemp("fault"))
    cluster.up()
    yield cluster
    cluster.down(grace=3)


def test_inject_show_clear_on_a_live_broker(broker, capsys):
    broker = broker.file.brokers[0].http
    args = ["--broker", broker]
    assert main(["fault", "inject", *args, "--stall-ms", "300", "--every", "1",
                 "--error-rate", "0.1", "--duration", "30"]) == 0  # fmt: skip
    out = capsys.readouterr().out.strip()
    # e.g. "... fault active: stalls of 300 ms every 1 s, errors 10 %, clears after 30 s
    # (30 s left)": no raw float such as since_s=3.205000211892184e-06, and no "active for
    # 41 µs" (rough edge 8: the age of a fault injected a moment ago says nothing)
    assert re.fullmatch(
        rf"{re.escape(broker)}: fault active: stalls of 300 ms every 1 s, "
        r"errors 10 %, clears after 30 s \([\d.]+ s left\)",
        out,
    ), out
    assert main(["fault", "show", *args, "--json"]) == 0
    state = json.loads(capsys.readouterr().out)  # --json keeps the raw numbers for scripts
    assert state["active"] and state["stall_ms"] == 300.0 and isinstance(state["since_s"], float)
    assert main(["fault", "clear", *args]) == 0
    assert capsys.readouterr().out == f"{broker}: no fault active\n"


def test_a_broker_named_in_its_cluster_file(broker, capsys):
    """At midnight the operator knows the broker's name, not its HTTP port."""
    cluster = str(broker.path)
    assert main(["fault", "inject", "--broker", "broker-1", "--cluster", cluster,
                 "--latency-ms", "5", "--duration", "30"]) == 0  # fmt: skip
    assert capsys.readouterr().out.startswith("broker-1: fault active: latency +5 ms")
    assert main(["fault", "show", "--broker", broker.file.brokers[0].http, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["latency_ms"] == 5.0  # the very broker
    assert main(["fault", "clear", "--broker", "broker-1", "--cluster", cluster]) == 0
    assert capsys.readouterr().out == "broker-1: no fault active\n"


@pytest.mark.parametrize(
    ("target", "message"),
    [(["--broker", "broker-1"], "--broker 'broker-1' is not an HTTP address (HOST:PORT); "
      "to name a broker, give its --cluster FILE too"),
     (["--broker", "broker-7", "--cluster", "{cluster}"],
      "no broker 'broker-7' in {cluster}: it has broker-1")],
)  # fmt: skip
def test_a_broker_not_found_by_name_is_one_line(broker, capsys, target, message):
    cluster = str(broker.path)
    target = [t.format(cluster=cluster) for t in target]
    assert main(["fault", "inject", *target, "--pause", "1"]) == 2
    assert capsys.readouterr().err == f"floodgate fault: error: {message.format(cluster=cluster)}\n"


def test_a_group_named_asks_for_one_of_its_brokers(tmp_path, capsys):
    """Which broker of a group is master is ZooKeeper's to say: the file cannot."""
    (tmp_path / "cluster.toml").write_text(
        'zk = "127.0.0.1:9"\n'
        + "".join(f'[[broker]]\nname = "group-2-{x}"\ngroup = "group-2"\n'
                  f'addr = "127.0.0.1:{9 + i}"\nhttp = "127.0.0.1:{19 + i}"\n'
                  for i, x in enumerate("ab"))
    )  # fmt: skip
    args = ["--broker", "group-2", "--cluster", str(tmp_path / "cluster.toml")]
    assert main(["fault", "clear", *args]) == 2
    assert capsys.readouterr().err == (
        "floodgate fault: error: group-2 is a group: name one of its brokers "
        "(group-2-a, group-2-b)\n"
    )
