"""The launcher's parts beyond its port plan (test_launcher_ports.py): what it makes of
ZooKeeper, TLS and ACL settings (the brokers' and controllers' command lines and
environment, the files it writes), its health probe, and the supervision of real
processes: an exit seen, a broker or controller started again, a paused broker
stopped as asked. Namespaced hosts need root and are driven in tests/integration/
test_netns_*.py."""

from __future__ import annotations

import os
import signal
import stat
import threading
import time
from pathlib import Path

import pytest

from broker_core.acl import admin_token
from broker_core.acl.tls import ENV_CA, ENV_CERT, ENV_KEY
from broker_core.cluster.cluster_file import load_cluster
from broker_core.cluster.health import last_line, wait_healthy
from broker_core.cluster.launcher import Cluster
from broker_core.cluster.members import broker_argv, controller_argv, ports_taken
from broker_core.cluster.ports import free_port_range, port_free
from broker_core.errors import BrokerError
from tests.waiting import wait_for


@pytest.fixture
def no_tls_env(monkeypatch):
    for name in (ENV_CA, ENV_CERT, ENV_KEY, admin_token.ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_last_line_is_the_last_that_says_something(tmp_path):
    log = tmp_path / "broker.log"
    assert last_line(None) == "" and last_line(log) == ""  # no log, a log not written yet
    log.write_text("")
    assert last_line(log) == ""
    log.write_text("starting\nerror: --port: 99999 is not a port \n\n   \n")
    assert last_line(log) == ": error: --port: 99999 is not a port"
    log.write_bytes(b"x" * 10_000 + b"\nbad byte \xff here\n")  # a long log, not UTF-8
    assert last_line(log) == ": bad byte \ufffd here"


def test_nothing_answering_is_not_healthy_after_the_timeout():
    addr = f"127.0.0.1:{free_port_range(1)}"
    t0 = time.monotonic()
    with pytest.raises(BrokerError, match=f"^broker at {addr} not healthy after 0.3 s$"):
        wait_healthy(addr, timeout=0.3)
    assert time.monotonic() - t0 < 2


def test_a_cluster_needs_a_broker(tmp_path):
    with pytest.raises(BrokerError, match="at least one broker"):
        Cluster(0, 20000, tmp_path)
    assert not tmp_path.joinpath("cluster.toml").exists()


def test_a_replicated_cluster_embeds_zookeeper_on_the_port_after_its_brokers(tmp_path):
    c = Cluster(0, 24000, tmp_path / "c", groups=2, replicas=2, replication="sync")
    try:
        zk = c.zookeeper
        assert zk.port == 24000 + ports_taken(groups=2, replicas=2) - 1
        assert zk.data_dir == tmp_path / "c" / "zookeeper"
        assert c.file.zk == zk.addr == f"127.0.0.1:{zk.port}"
        assert c.file.replication == "sync" and c.file.replicated
        assert [b.group for b in c.file.brokers] == ["group-1", "group-1", "group-2", "group-2"]
        assert zk.proc is None and not (tmp_path / "c").exists()  # nothing before up()
    finally:
        c.exits.close()


def test_a_named_zookeeper_is_used_as_given_and_single_copies_have_none(tmp_path):
    given = Cluster(0, 24000, tmp_path / "a", groups=1, zk="10.0.0.5:2181")
    single = Cluster(2, 24000, tmp_path / "b", replication="sync")
    try:
        assert given.zookeeper is None and given.file.zk == "10.0.0.5:2181"
        assert given.file.replication == "async"  # the default, for its groups
        assert single.zookeeper is None and single.file.zk == "" and not single.file.replicated
        assert single.file.replication == ""  # single copies replicate nothing
        assert single.extra == [] and single.tls_ca is single.credentials is None
    finally:
        given.exits.close()
        single.exits.close()


def test_a_broker_that_exits_while_starting_is_named_with_its_own_line(tmp_path):
    """extra_args reach the broker's command line; one it refuses ends `up` with the
    broker's own words, and leaves no process and no cluster file."""
    base = free_port_range(4)
    c = Cluster(2, base, tmp_path / "c", extra_args=["--no-such-flag"])
    with pytest.raises(BrokerError, match=r"^broker at 127\.0\.0\.1:\d+ exited with 2 while "
                                          r"starting: .*unrecognized arguments: --no-such-flag"):
        c.up(timeout=30)
    assert c.procs == {} and not (tmp_path / "c" / "cluster.toml").exists()
    assert (tmp_path / "c" / "logs" / "broker-1.log").exists()
    assert all(port_free(p) for p in range(base, base + 4))


# --- a cluster with TLS and the ACL --------------------------------------------------

@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    cluster = Cluster(1, free_port_range(2), tmp_path_factory.mktemp("secured") / "c",
                      name="vault", acl=True, tls=True, extra_args=["--queues", "2"])
    cluster.up()
    yield cluster
    cluster.down(grace=5)


def test_acl_and_tls_give_the_broker_its_flags_and_the_files_they_name(secured):
    from broker_core.acl.credentials import load

    data = secured.data
    entry = secured.file.brokers[0]
    proc = secured.procs[entry.name]
    # the broker's command line is members' with the security flags and the metrics dir
    assert proc.args == broker_argv(
        entry, "vault", "async", "64M",
        ["--queues", "2", "--tls-cert", str(data / "tls" / "broker.pem"),
         "--tls-key", str(data / "tls" / "broker.key"), "--tls-ca", str(data / "tls" / "ca.pem"),
         "--acl", "--acl-admin", str(data / "admin.credentials.toml"), "--admin-token-file",
         str(data / "admin.token"), "--metrics-dir", str(data / "metrics")])
    # the super user and the admin token, written at up(), readable by their owner only
    for path in (secured.credentials, secured.admin_token):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    admin = load(secured.credentials)
    assert admin.user == "admin" and len(admin.secret) >= 24
    assert len(admin_token.load(secured.admin_token)) >= 32
    # the cluster file names them, and this process as its supervisor
    spec = load_cluster(secured.path)
    assert (spec.tls_ca, spec.credentials, spec.admin_token) == (
        str(secured.tls_ca), str(secured.credentials), str(secured.admin_token))
    assert spec.supervisor_pid == os.getpid() and spec.name == "vault"


def test_a_tls_broker_is_healthy_to_a_probe_trusting_its_ca_only(secured, no_tls_env):
    entry = secured.file.brokers[0]
    proc = secured.procs[entry.name]
    wait_healthy(entry.http, 5, proc, tls_ca=str(secured.tls_ca))  # answered by that pid
    with pytest.raises(BrokerError, match="not healthy after 0.5 s"):
        wait_healthy(entry.http, 0.5, proc)  # plain HTTP to a TLS port
    no_tls_env.setenv(ENV_CA, str(secured.tls_ca))
    wait_healthy(entry.http, 5, proc)  # the process's own TLS settings


def test_the_admin_endpoints_take_the_launchers_token_only(secured, no_tls_env):
    from broker_core.client.admin import AdminError, quota

    no_tls_env.setenv(ENV_CA, str(secured.tls_ca))
    http = secured.file.brokers[0].http
    with pytest.raises(AdminError, match="take this broker's admin token only"):
        quota(http, "DELETE")
    token = admin_token.load(secured.admin_token)
    assert quota(http, "DELETE", token=token)["removed"] == 0


# --- supervision -----------------------------------------------------------------

def supervising(cluster: Cluster, restart: bool, exits: list):
    stop = threading.Event()
    t = threading.Thread(target=cluster.supervise, args=(stop.is_set, restart,
                                                         lambda *e: exits.append(e)),
                         daemon=True)
    t.start()

    def end() -> None:
        stop.set()
        cluster.stop_supervising()  # wakes it: it sleeps until a child exits otherwise
        t.join(5)
        assert not t.is_alive(), "supervise did not return once told to stop"

    return end


def test_supervise_reports_an_exit_restarts_when_asked_and_down_wakes_a_paused_broker(
        cluster_factory):
    cluster = cluster_factory(n=2)
    exits: list = []
    end = supervising(cluster, restart=False, exits=exits)
    try:
        cluster.procs["broker-2"].kill()
        wait_for(lambda: exits, 10, "the exit reported")
        assert exits == [("broker-2", -signal.SIGKILL)]
        assert "broker-2" not in cluster.procs  # not started again
        assert cluster.procs["broker-1"].poll() is None
    finally:
        end()
    end = supervising(cluster, restart=True, exits=exits)
    try:
        old = cluster.procs["broker-1"]
        old.kill()
        new = wait_for(lambda: cluster.procs.get("broker-1") not in (None, old)
                       and cluster.procs["broker-1"], 10, "broker-1 started again")
        assert exits[-1] == ("broker-1", -signal.SIGKILL)
        wait_healthy(cluster.file.brokers[0].http, 30, new)  # on its old ports
    finally:
        end()
    new.send_signal(signal.SIGSTOP)  # as a drill pauses a broker
    t0 = time.monotonic()
    cluster.down(grace=10)
    assert new.returncode == 0 and time.monotonic() - t0 < 9  # stopped as asked, not killed
    assert cluster.procs == {}
    assert load_cluster(cluster.path).supervisor_pid is None  # nobody supervises it now
    cluster.down(grace=1)  # twice: nothing left to stop


def environ_of(pid: int) -> dict[str, str]:
    """A child's environment, from /proc (which reads empty for a moment after its exec)."""
    raw = wait_for(lambda: Path(f"/proc/{pid}/environ").read_bytes(), 5, f"pid {pid}'s environ")
    return dict(kv.decode().split("=", 1) for kv in raw.split(b"\0") if b"=" in kv)


def test_controllers_get_the_clusters_credentials_and_ca_and_are_started_again(tmp_path):
    """A controller's command line and environment, and its restart by the supervisor
    (ZooKeeper not running: a controller waits for it 15 s before it gives up)."""
    zk = f"127.0.0.1:{free_port_range(1)}"
    cluster = Cluster(0, free_port_range(7), tmp_path / "c", name="ctl", groups=1, zk=zk,
                      acl=True, tls=True)
    exits: list = []
    end = None
    try:
        first = cluster.start_controller("controller-1")
        assert first.args == controller_argv(zk, "ctl", "controller-1",
                                             (tmp_path / "c").resolve() / "events.jsonl")
        env = environ_of(first.pid)
        assert env["FLOODGATE_CREDENTIALS"] == str(cluster.credentials)
        assert env[ENV_CA] == str(cluster.tls_ca)
        end = supervising(cluster, restart=True, exits=exits)
        first.kill()
        again = wait_for(lambda: cluster.controllers.get("controller-1") not in (None, first)
                         and cluster.controllers["controller-1"], 10, "the controller again")
        assert again.poll() is None and again.args == first.args
        assert exits == []  # on_exit is the brokers' (a controller's exit is logged)
    finally:
        if end is not None:
            end()
        cluster.down(grace=1)
    assert cluster.controllers == {} and again.poll() is not None
