"""The launcher's port plan and its cluster file: which ports a cluster takes from its
base (no two parts share one; the demo's producer comes after them), and a cluster
file that reads back as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.cluster.cluster_file import load_cluster
from broker_core.cluster.members import broker_ports, group_entries, ha_ports, ports_taken


@pytest.mark.parametrize("brokers", [1, 3, 6])
def test_single_copy_brokers_take_a_pair_each_and_nothing_else(brokers):
    base = 20000
    used = [p for i in range(brokers) for p in broker_ports(base, i)]
    assert len(set(used)) == len(used) == ports_taken(brokers=brokers)
    assert sorted(used) == list(range(base, base + ports_taken(brokers=brokers)))


@pytest.mark.parametrize("groups, replicas", [(1, 2), (3, 2), (4, 3)])
def test_replicated_brokers_take_a_triple_each_then_zookeeper(groups, replicas, tmp_path):
    base = 30000
    entries = group_entries(groups, replicas, base, tmp_path, "127.0.0.1")
    assert [e.name for e in entries[:2]] == ["group-1-a", "group-1-b"][:replicas]
    used = [int(a.rsplit(":", 1)[1]) for e in entries for a in (e.addr, e.http, e.ha)]
    assert used == [p for i in range(groups * replicas) for p in ha_ports(base, i)]
    zk = base + 3 * len(entries)  # where the launcher puts its embedded ZooKeeper
    assert len(set(used)) == len(used) and zk not in used
    assert ports_taken(groups=groups, replicas=replicas) == zk - base + 1


def test_the_cluster_file_reads_back_as_written(tmp_path):
    from broker_core.cluster.cluster_file import ClusterFile

    entries = group_entries(2, 2, 31000, tmp_path, "127.0.0.1")
    written = ClusterFile("night", entries, 4242, "127.0.0.1:31012", "sync")
    path = Path(tmp_path) / "cluster.toml"
    written.save(path)
    assert load_cluster(path) == written
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left


def test_a_second_cluster_on_the_same_ports_or_data_is_refused_saying_why(tmp_path):
    """Its broker exits (port in use) while the first cluster's answers /healthz on that
    port: the launcher used to take that answer for its own broker and say "up". On the
    same data, the launcher says what its broker said, not only "exited with 1"."""
    from broker_core.cluster.launcher import Cluster
    from broker_core.cluster.ports import free_port_range
    from broker_core.errors import BrokerError

    base = free_port_range(2)
    first = Cluster(1, base, tmp_path / "first")
    first.up()
    try:
        second = Cluster(1, base, tmp_path / "second")
        with pytest.raises(BrokerError, match="answered by another broker .* another cluster"):
            second.up()
        assert all(p.poll() is not None for p in second.procs.values())  # nothing left
        assert not (tmp_path / "second" / "cluster.toml").exists()
        assert first.procs["broker-1"].poll() is None  # the first serves on
        same_data = Cluster(1, free_port_range(2), tmp_path / "first")  # its store locked
        with pytest.raises(BrokerError, match="exited with 1 while starting: .*store .* is "
                                              "in use by another store"):
            same_data.up()  # the broker's own line, not only its exit code
    finally:
        first.down(grace=3)


def test_ranges_drawn_in_a_row_never_overlap_and_stay_in_the_process_share(monkeypatch):
    """Found free is not yet bound: a range handed out is not handed out again while its
    processes start (here every port stays free, as before anything binds), and
    FLOODGATE_PORTS keeps a process (a test worker) to its own share."""
    from broker_core.cluster import ports

    monkeypatch.setattr(ports, "_handed", type(ports._handed)(maxlen=ports.RECENT))
    monkeypatch.setattr(ports, "port_free", lambda port, host="127.0.0.1": True)
    monkeypatch.setenv("FLOODGATE_PORTS", "25000-25100")
    # (4 x 10 of 100: 60 ports left in at most 4 gaps, one of 10 at least, whatever falls)
    got = sorted(ports.free_port_range(10) for _ in range(4))
    assert all(25000 <= b and b + 10 <= 25100 for b in got)
    assert all(a + 10 <= b for a, b in zip(got, got[1:], strict=False)), got  # no port twice
    monkeypatch.setenv("FLOODGATE_PORTS", "26000-26010")
    assert ports.free_port_range(10) == 26000
    with pytest.raises(RuntimeError, match="no 10 consecutive free ports in 26000-26010"):
        ports.free_port_range(10)


@pytest.mark.parametrize("value", ["25000", "x-y", "30000-20000", "80-90"])
def test_a_port_share_that_is_not_low_high_is_refused_by_name(monkeypatch, value):
    from broker_core.cluster import ports

    monkeypatch.setenv("FLOODGATE_PORTS", value)
    with pytest.raises(ValueError, match="FLOODGATE_PORTS"):
        ports.free_port_range(3)
