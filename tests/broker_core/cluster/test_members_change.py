"""A raft group's members changed one at a time (`cluster add-replica`, `remove-replica`):
the cluster file's `joined` entries, the new member's name, ports and flags, the commands'
refusals and their handling of the leader's answer (the leader faked: its side is
broker_core/raft's), and the supervisor taking up an edited cluster file on SIGHUP
(single-copy brokers: nothing here depends on Raft)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from broker_core.client import admin
from broker_core.cluster import health
from broker_core.cluster.cluster_file import BrokerEntry, ClusterFile, load_cluster
from broker_core.cluster.members import (
    broker_argv,
    group_entries,
    next_member,
    ports_used,
    raft_member_flag,
)
from broker_core.cluster.ports import free_port_range
from console.cli import main
from console.commands import member_cmd
from console.errors import CommandFailed
from tests.waiting import wait_for


def raft_file(tmp_path: Path, replicas: int = 3, base: int = 20000, **kw) -> ClusterFile:
    spec = ClusterFile("t", group_entries(2, replicas, base, tmp_path, "127.0.0.1"), **kw)
    spec.consensus = "raft"
    return spec


# --- the cluster file and the new member's command line ---------------------------------

def test_joined_is_written_only_when_true_and_read_back(tmp_path):
    spec = raft_file(tmp_path)
    spec.brokers.append(next_member(spec, "group-1", lambda *_: True))
    path = tmp_path / "cluster.toml"
    spec.save(path)
    assert path.read_text().count("\njoined = ") == 1
    back = load_cluster(path)
    assert back.brokers == spec.brokers and back.brokers[-1].joined
    assert not any(b.joined for b in back.brokers[:-1])


def test_a_file_written_before_joined_loads_as_before(tmp_path):
    path = tmp_path / "cluster.toml"
    path.write_text('name = "old"\nconsensus = "raft"\n[[broker]]\nname = "group-1-a"\n'
                    'addr = "127.0.0.1:1"\nhttp = "127.0.0.1:2"\ngroup = "group-1"\n'
                    'ha = "127.0.0.1:3"\n')
    (entry,) = load_cluster(path).brokers
    assert entry == BrokerEntry("group-1-a", "127.0.0.1:1", "127.0.0.1:2", "", "group-1",
                                "127.0.0.1:3") and not entry.joined


def test_a_joined_member_starts_with_raft_join_and_the_groups_members_with_itself():
    spec = raft_file(Path("/d"))
    new = next_member(spec, "group-1", lambda *_: True)
    group = [*spec.groups["group-1"], new]
    argv = broker_argv(new, "t", "async", "64M", [], raft_group=group)
    assert "--raft-join" in argv
    flags = [argv[i + 1] for i, a in enumerate(argv) if a == "--raft-member"]
    assert flags == [raft_member_flag(b) for b in group] and flags[-1].startswith("group-1-d=")
    first = broker_argv(group[0], "t", "async", "64M", [], raft_group=group)
    assert "--raft-join" not in first  # an original member was never joined
    # a controller's group has no Raft to join, whatever the entry says
    assert "--raft-join" not in broker_argv(new, "t", "async", "64M", [], zk="127.0.0.1:9")


# --- the new member's name and ports ------------------------------------------------------

def test_the_next_letter_ports_above_the_files_and_data_beside_the_others(tmp_path):
    spec = raft_file(tmp_path)  # two groups of three: ports 20000-20017
    assert max(ports_used(spec)) == 20017
    new = next_member(spec, "group-1", lambda *_: True)
    assert (new.name, new.group, new.joined) == ("group-1-d", "group-1", True)
    assert (new.addr, new.http, new.ha) == ("127.0.0.1:20018", "127.0.0.1:20019",
                                            "127.0.0.1:20020")
    assert new.data == str(tmp_path / "group-1-d")
    assert raft_member_flag(new) == "group-1-d=127.0.0.1:20018:20020"


def test_ports_in_use_and_a_removed_members_name_and_data_are_skipped(tmp_path):
    spec = raft_file(tmp_path)
    busy = {20019, 20022}  # taken by someone else: no triple from 20018 to 20022 is free
    asked = []

    def is_free(port: int, host: str) -> bool:
        asked.append(host)
        return port not in busy

    (tmp_path / "group-2-d").mkdir()  # left by a group-2-d removed before: its Raft state
    new = next_member(spec, "group-2", is_free)
    assert new.name == "group-2-e" and new.addr == "127.0.0.1:20023"
    assert set(asked) == {"127.0.0.1"}  # on the cluster's host
    # group-1-b taken out: the next is still after the last letter, not b again
    spec.brokers = [b for b in spec.brokers if b.name != "group-1-b"]
    assert next_member(spec, "group-1", lambda *_: True).name == "group-1-d"


def test_ports_above_zookeeper_too_and_none_left_is_said():
    spec = ClusterFile("t", [BrokerEntry("group-1-a", "h:100", "h:101", "/d/a", "group-1",
                                         "h:102")], zk="h:500,h2:65533")
    assert ports_used(spec) == {100, 101, 102, 500, 65533}
    from broker_core.errors import BrokerError

    with pytest.raises(BrokerError, match="no three free consecutive ports on h"):
        next_member(spec, "group-1", lambda *_: True)  # 65533-65535 the last triple
    spec.zk = ""
    assert next_member(spec, "group-1", lambda *_: True).addr == "h:103"


# --- the commands' refusals -----------------------------------------------------------------

def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["cluster", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", [["add-replica"], ["remove-replica", "--member", "x"]])
def test_a_controllers_cluster_and_an_unknown_group_are_refused(tmp_path, capsys, command):
    spec = raft_file(tmp_path)
    path = tmp_path / "cluster.toml"
    spec.consensus, spec.zk = "", "127.0.0.1:2181"
    spec.save(path)
    code, out, err = run(capsys, command[0], "--cluster", str(path), "--group", "group-1",
                         *command[1:])
    assert code == 2 and out == ""
    assert err == (f"floodgate cluster: error: {path}: its groups do not run Raft (cluster up "
                   "--consensus raft); a controller's groups have a fixed set of brokers\n")
    raft_file(tmp_path).save(path)
    code, _, err = run(capsys, command[0], "--cluster", str(path), "--group", "group-9",
                       *command[1:])
    assert code == 2
    assert err.endswith(f"no group 'group-9' in {path} (groups: group-1, group-2)\n")


def test_removing_below_three_or_an_unknown_member_is_refused(tmp_path, capsys):
    path = tmp_path / "cluster.toml"
    raft_file(tmp_path).save(path)
    code, _, err = run(capsys, "remove-replica", "--cluster", str(path), "--group", "group-1",
                       "--member", "group-1-a")
    assert code == 2 and len(err.splitlines()) == 1
    assert "group-1 has 3 members: removing one leaves 2, and a group of 2 cannot lose one" \
        in err
    code, _, err = run(capsys, "remove-replica", "--cluster", str(path), "--group", "group-1",
                       "--member", "group-2-a")
    assert code == 2
    assert err.endswith("group-2-a is not a member of group-1 (group-1-a, group-1-b, "
                        "group-1-c)\n")
    assert load_cluster(path).brokers == raft_file(tmp_path).brokers  # untouched


def test_adding_without_a_running_supervisor_is_refused(tmp_path, capsys):
    path = tmp_path / "cluster.toml"
    raft_file(tmp_path).save(path)  # no supervisor_pid: `cluster up` is not running
    code, _, err = run(capsys, "add-replica", "--cluster", str(path), "--group", "group-1")
    assert code == 1 and "no `cluster up` supervising it" in err
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    raft_file(tmp_path, supervisor_pid=dead.pid).save(path)
    assert run(capsys, "add-replica", "--cluster", str(path), "--group", "group-1")[0] == 1
    # a process that would die of SIGHUP (an older `cluster up`) is not sent one
    raft_file(tmp_path, supervisor_pid=os.getpid()).save(path)
    with pytest.raises(CommandFailed, match="does not take SIGHUP"):
        member_cmd.supervisor(load_cluster(path), path)
    assert len(load_cluster(path).brokers) == 6


# --- the commands against a faked leader and supervisor (this process) -------------------

@pytest.fixture
def faked(tmp_path, monkeypatch):
    """A raft cluster file whose supervisor is this process (its SIGHUPs counted), whose
    leader is group-1-a and whose new brokers are healthy at once."""
    hups = []
    previous = signal.signal(signal.SIGHUP, lambda *_: hups.append(1))
    path = tmp_path / "cluster.toml"
    raft_file(tmp_path, base=free_port_range(18), supervisor_pid=os.getpid()).save(path)
    spec = load_cluster(path)
    monkeypatch.setattr(member_cmd, "leader_of", lambda members, group: members[0])
    monkeypatch.setattr(health, "wait_healthy", lambda *a, **k: None)
    monkeypatch.setattr(member_cmd, "_stopped", lambda addr, timeout: True)
    calls = []
    yield path, spec, hups, calls
    signal.signal(signal.SIGHUP, previous)


def test_add_replica_asks_the_leader_and_says_what_it_answered(faked, monkeypatch, capsys):
    path, spec, hups, calls = faked

    def members(http, body, token=None, timeout=90.0):
        calls.append((http, body, load_cluster(path).brokers[-1].name))
        flags = [raft_member_flag(b) for b in spec.groups["group-1"]] + [body["add"]]
        return {"group": "group-1", "members": flags, "term": 3, "index": 40, "took_s": 0.84,
                "snapshot_bytes": 12_345_678}

    monkeypatch.setattr(admin, "members", members)
    code, out, err = run(capsys, "add-replica", "--cluster", str(path), "--group", "group-1")
    assert (code, err) == (0, "")
    assert out == ("group-1: group-1-d joined (members a, b, c, d; 12.3 MB of store copied in "
                   "0.8 s; term 3)\n")
    new = load_cluster(path).broker("group-1-d")
    # the entry was in the file (and the supervisor told) before the leader was asked
    assert calls == [(spec.brokers[0].http, {"add": raft_member_flag(new)}, "group-1-d")]
    assert new.joined and hups == [1]
    assert load_cluster(path).supervisor_pid == os.getpid()


def test_a_refused_add_takes_the_entry_out_again_and_says_why(faked, monkeypatch, capsys):
    path, spec, hups, _ = faked

    def members(http, body, token=None, timeout=90.0):
        raise admin.AdminError(f"{http}: group-1-d did not catch up within 60 s")

    monkeypatch.setattr(admin, "members", members)
    code, out, err = run(capsys, "add-replica", "--cluster", str(path), "--group", "group-1")
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert "group-1: group-1-d not added: " in err and "did not catch up within 60 s" in err
    assert load_cluster(path).brokers == spec.brokers  # as it was
    assert hups == [1, 1]  # told of the new entry, then of its removal


def test_remove_replica_asks_the_leader_then_takes_the_entry_out(faked, monkeypatch, capsys):
    path, spec, hups, calls = faked
    spec.brokers.append(next_member(spec, "group-1", lambda *_: True))
    spec.save(path)

    def members(http, body, token=None, timeout=90.0):
        calls.append((http, body))
        return {"group": "group-1", "term": 4, "members": [
            raft_member_flag(b) for b in spec.groups["group-1"] if b.name != body["remove"]]}

    monkeypatch.setattr(admin, "members", members)
    # the leader itself may go: the request is still the leader's
    code, out, _ = run(capsys, "remove-replica", "--cluster", str(path), "--group", "group-1",
                       "--member", "group-1-a", "--json")
    assert code == 0 and json.loads(out)["term"] == 4
    assert calls == [(spec.brokers[0].http, {"remove": "group-1-a"})]
    assert [b.name for b in load_cluster(path).groups["group-1"]] == [
        "group-1-b", "group-1-c", "group-1-d"]
    assert hups == [1]
    monkeypatch.setattr(admin, "members", lambda *a, **k: (_ for _ in ()).throw(
        admin.AdminError("127.0.0.1:1: not the leader (group-1-b leads)")))
    spec.brokers.append(next_member(spec, "group-1", lambda *_: True))  # e: four again
    spec.save(path)
    code, _, err = run(capsys, "remove-replica", "--cluster", str(path), "--group", "group-1",
                       "--member", "group-1-c")
    assert code == 1 and "group-1: group-1-c not removed: " in err and "group-1-b leads" in err
    assert "group-1-c" in load_cluster(path).addrs and hups == [1]


# --- the supervisor takes up the edited file on SIGHUP -------------------------------------

def health_pid(http: str) -> int:
    with urllib.request.urlopen(f"http://{http}/healthz", timeout=2) as r:
        return int(r.headers["X-Floodgate-Pid"])


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_sighup_starts_an_added_broker_and_stops_a_removed_one(tmp_path, monkeypatch):
    for name in ("FLOODGATE_TLS_CA", "FLOODGATE_ADMIN_TOKEN_FILE", "FLOODGATE_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "c"
    up = subprocess.Popen([sys.executable, "-m", "console.cli", "cluster", "up", "--brokers",
                           "2", "--data", str(data), "--base-port", str(free_port_range(4))],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = data / "cluster.toml"
    try:
        # until the supervisor takes SIGHUP (it is not supervising yet when the file appears)
        wait_for(lambda: path.exists() and member_cmd.supervisor(load_cluster(path), path),
                 60, "cluster up supervising", ignore=(Exception,))
        spec = load_cluster(path)
        assert spec.supervisor_pid == up.pid
        old = {b.name: health_pid(b.http) for b in spec.brokers}
        tcp = free_port_range(2)
        spec.brokers.append(BrokerEntry("broker-3", f"127.0.0.1:{tcp}",
                                        f"127.0.0.1:{tcp + 1}", str(data / "broker-3")))
        spec.save(path)
        os.kill(up.pid, signal.SIGHUP)
        health.wait_healthy(spec.brokers[-1].http, 30)
        added = health_pid(spec.brokers[-1].http)
        spec.brokers = [b for b in spec.brokers if b.name != "broker-2"]
        spec.save(path)
        os.kill(up.pid, signal.SIGHUP)
        wait_for(lambda: not alive(old["broker-2"]), 20, "broker-2 stopped")
        assert alive(old["broker-1"]) and alive(added) and up.poll() is None
        # what `cluster down` sends (its wait for the pid to go would see this test's
        # unreaped child as running)
        up.send_signal(signal.SIGTERM)
        assert up.wait(30) == 0
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
            up.wait(30)
    assert not alive(added) and not alive(old["broker-1"])
    # the supervisor's last word on the file is the reloaded one
    after = load_cluster(path)
    assert [b.name for b in after.brokers] == ["broker-1", "broker-3"]
    assert after.supervisor_pid is None
