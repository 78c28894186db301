"""Brokers on hosts of their own (network namespaces) and the faults a network makes
between them: every kind applied, seen to act, and healed; nothing left behind, even
when the launcher is SIGKILLed."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request

import pytest

from broker_core.cluster import netfault, netns
from broker_core.cluster.launcher import Cluster
from broker_core.cluster.netns_reaper import alive
from broker_core.cluster.ports import free_port_range

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(netns.unavailable() is not None,
                                 reason=str(netns.unavailable()))]


def reachable(addr: str, timeout: float = 0.7) -> bool:
    host, port = addr.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def reachable_from(layout, node: str, addr: str) -> bool:
    host, port = addr.rsplit(":", 1)
    code = (f"import socket; socket.create_connection(({host!r}, {port}), timeout=0.7)")
    return subprocess.run([*layout.exec_prefix(node), sys.executable, "-c", code],
                          capture_output=True).returncode == 0


def healthz_s(http: str) -> float:
    began = time.monotonic()
    with urllib.request.urlopen(f"http://{http}/healthz", timeout=5) as r:
        assert r.status == 200
    return time.monotonic() - began


def ruleset(layout, node: str) -> str:
    return subprocess.run([*layout.exec_prefix(node), "nft", "list", "ruleset"],
                          capture_output=True, text=True).stdout


@pytest.fixture
def hosts(tmp_path):
    cluster = Cluster(2, free_port_range(4), tmp_path / "c", netns=True)
    try:
        cluster.up()
        yield cluster
    finally:
        tag = cluster.layout.tag if cluster.layout else None
        cluster.down(grace=5.0)
        if tag:
            assert netns.leftovers(tag) == []


def test_each_network_fault_acts_and_heal_removes_it(hosts, tmp_path):
    layout, state = hosts.layout, hosts.data
    b1, b2 = hosts.file.brokers
    assert b1.addr.startswith(layout.gateway.rsplit(".", 1)[0] + ".")  # their own addresses
    assert reachable(b1.addr) and reachable_from(layout, "broker-1", b2.addr)

    netfault.partition(layout, state, ["broker-1"], ["broker-2"])
    assert not reachable_from(layout, "broker-1", b2.addr)
    assert not reachable_from(layout, "broker-2", b1.addr)
    assert reachable(b1.addr) and reachable(b2.addr)  # clients were on neither side

    netfault.isolate(layout, state, "broker-2")
    assert not reachable(b2.addr)

    netfault.heal(layout, state)
    assert reachable(b2.addr) and reachable_from(layout, "broker-1", b2.addr)
    assert "floodgate" not in ruleset(layout, "broker-1") + ruleset(layout, "broker-2")

    netfault.partition(layout, state, ["clients"], ["broker-1"], one_way=True)
    assert not reachable(b1.addr) and reachable_from(layout, "broker-2", b1.addr)
    netfault.heal(layout, state)

    netfault.loss(layout, state, "broker-1", 100)
    assert not reachable(b1.addr)
    netfault.heal(layout, state)
    assert reachable(b1.addr)

    netfault.rate(layout, state, "broker-2", 64)
    qdisc = subprocess.run([*layout.exec_prefix("broker-2"), "tc", "qdisc", "show", "dev",
                            "eth0"], capture_output=True, text=True).stdout
    assert "tbf" in qdisc and "64Kbit" in qdisc

    quick = min(healthz_s(b1.http) for _ in range(3))
    ports = [int(b1.addr.rsplit(":", 1)[1]), int(b1.http.rsplit(":", 1)[1])]
    netfault.delay(layout, state, "broker-1", 80, ports)
    assert [f["kind"] for f in netfault.load(state)] == ["rate", "delay"]
    slow = min(healthz_s(b1.http) for _ in range(3))
    assert slow >= 0.16 > quick  # 80 ms each way
    with pytest.raises(netfault.NetFaultError, match="delayed already"):
        netfault.delay(layout, state, "broker-1", 10, ports)

    healed = netfault.heal(layout, state)
    assert [f["kind"] for f in healed] == ["rate", "delay"] and netfault.load(state) == []
    assert min(healthz_s(b1.http) for _ in range(3)) < 0.1
    assert "tbf" not in subprocess.run([*layout.exec_prefix("broker-2"), "tc", "qdisc", "show",
                                        "dev", "eth0"], capture_output=True, text=True).stdout


def test_targets_and_values_it_did_not_make_are_refused(hosts):
    layout, state = hosts.layout, hosts.data
    with pytest.raises(netns.NetnsError, match="no host 'broker-9'"):
        netfault.isolate(layout, state, "broker-9")
    with pytest.raises(netfault.NetFaultError, match="both sides"):
        netfault.partition(layout, state, ["broker-1"], ["broker-1", "broker-2"])
    with pytest.raises(netfault.NetFaultError, match="loss"):
        netfault.loss(layout, state, "broker-1", 250)
    assert netfault.load(state) == []
    result = subprocess.run([sys.executable, "-m", "console.cli", "fault", "net", "--cluster",
                             str(hosts.path), "--isolate", "10.0.0.1"],
                            capture_output=True, text=True)
    assert result.returncode != 0 and len(result.stderr.strip().splitlines()) == 1
    assert "no host '10.0.0.1'" in result.stderr
    netfault.loss(layout, state, "broker-2", 5)
    try:
        shown = subprocess.run([sys.executable, "-m", "console.cli", "fault", "show",
                                "--cluster", str(hosts.path)], capture_output=True, text=True)
    finally:
        netfault.heal(layout, state)
    assert shown.returncode == 0, shown.stderr
    assert "broker-1: no fault active" in shown.stdout
    assert "network: loss 5 % on broker-2's link" in shown.stdout


def test_a_sigkilled_launcher_leaves_no_namespace_link_rule_or_process(tmp_path):
    data = tmp_path / "c"
    launcher = subprocess.Popen(
        [sys.executable, "-m", "console.cli", "cluster", "up", "--brokers", "2", "--netns",
         "--data", str(data), "--base-port", str(free_port_range(4))],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in launcher.stdout:
            if "stops them all" in line:
                break
        spec = tomllib.loads((data / "cluster.toml").read_text())
        tag = spec["netns"]["tag"]
        netfault.delay(netns.NetLayout.from_dict(spec["netns"]), data, "broker-1", 10,
                       [int(spec["broker"][0]["addr"].rsplit(":", 1)[1])])
        in_them = [p for h in spec["netns"]["hosts"] for p in netns.pids_in(h["netns"])]
        assert len(in_them) >= 3 and netns.leftovers(tag)  # two brokers and the relay
    finally:
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
    deadline = time.monotonic() + 15
    # (SIGKILL takes a process in an uninterruptible wait, an msync say, once it leaves
    # it: on a slow disk after its namespace is gone)
    while (netns.leftovers(tag) or [pid for pid in in_them if alive(pid)]) and \
            time.monotonic() < deadline:
        time.sleep(0.2)
    assert netns.leftovers(tag) == []
    assert not [pid for pid in in_them if alive(pid)]  # (a zombie is not alive)
    assert "floodgate" not in subprocess.run(["nft", "list", "ruleset"], capture_output=True,
                                             text=True).stdout
