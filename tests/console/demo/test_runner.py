"""`floodgate demo`'s runner (console.demo.runner.Demo): its data directory, its ports
and their refusal before anything starts, what it says with no producer answering, and
one small demo run for real (a broker with TLS and the ACL, the load and the clients
processes, each as its own user) from start to stop, leaving nothing running."""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from pathlib import Path

import pytest

from broker_core.acl import admin_token
from broker_core.acl.tls import ENV_CA
from broker_core.client.admin import offsets, quota
from broker_core.cluster.ports import free_port_range, port_free
from console.demo.runner import (
    BROKER_RT_PRIORITY,
    DEMO_GROUP,
    KEY_PREFIX,
    REST_SCHED,
    Demo,
    DemoOptions,
)
from console.demo.script import DEMO_TOPIC
from console.errors import CommandFailed
from kernel_tuning.realtime import allowed
from tests.ports import a_port_taken
from tests.waiting import wait_for

ENV = ("FLOODGATE_CREDENTIALS", ENV_CA, admin_token.ENV)


@pytest.fixture
def env_kept():
    """The demo makes this process its cluster's admin; put the environment back as it
    was, unset variables unset (the runner puts them back as empty strings)."""
    before = {k: os.environ.get(k) for k in ENV}
    yield before
    for k, v in before.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_a_demo_without_data_makes_a_temporary_dir_and_removes_it_at_stop():
    demo = Demo(DemoOptions())
    made = demo.data_dir
    try:
        assert made.is_dir() and made.name.startswith("floodgate-demo-")
        assert demo.removes_data
    finally:
        demo.stop()  # never started: stopping is still safe, and cleans up
    assert not made.exists()
    demo.stop()  # twice: nothing left to do


def test_a_demo_given_data_keeps_it(tmp_path):
    data = tmp_path / "kept"
    demo = Demo(DemoOptions(data=data))
    assert demo.data_dir == data and not demo.removes_data
    data.mkdir()
    (data / "note").write_text("mine")
    demo.stop()
    assert (data / "note").read_text() == "mine"


@pytest.mark.parametrize("brokers, groups, taken", [(6, 0, 12), (2, 4, 3 * 2 * 4 + 1)])
def test_the_producer_serves_on_the_first_port_after_the_clusters(brokers, groups, taken,
                                                                   tmp_path):
    demo = Demo(DemoOptions(brokers=brokers, groups=groups, data=tmp_path, base_port=21000))
    assert demo.producer_port == 21000 + taken
    assert demo.producer_addr == f"127.0.0.1:{21000 + taken}"


@pytest.mark.parametrize("which", [0, 4])  # a broker's port, the producer's
def test_a_port_in_use_is_refused_before_anything_starts(which):
    with a_port_taken(5, which) as base:
        demo = Demo(DemoOptions(brokers=2, base_port=base))
        made = demo.data_dir
        with pytest.raises(CommandFailed, match=f"^port\\(s\\) {base + which} in use: pick "
                                                f"another --base-port$"):
            demo.start()
    assert not made.exists()  # nothing started: its temporary dir is gone too
    assert demo.cluster is None and demo.events is None
    assert all(port_free(p) for p in range(base, base + 5))


def test_a_port_in_use_leaves_a_given_data_dir_unwritten(tmp_path):
    with a_port_taken(3, 0) as base:
        with pytest.raises(CommandFailed, match="in use"):
            Demo(DemoOptions(brokers=1, base_port=base, data=tmp_path / "d")).start()
    assert not (tmp_path / "d").exists()


def test_realtime_only_when_asked_and_allowed(tmp_path):
    plain = Demo(DemoOptions(data=tmp_path))
    assert plain.realtime is False and plain.realtime_args == []
    asked = Demo(DemoOptions(data=tmp_path, realtime=True))
    two_cpus = len(os.sched_getaffinity(0)) >= 2
    assert asked.realtime is (allowed(BROKER_RT_PRIORITY) and two_cpus)
    assert asked.realtime_args == (["--realtime", str(BROKER_RT_PRIORITY)] if asked.realtime
                                   else [])
    # --plain-priority: every part at the host's priority, whatever else was asked
    plain = Demo(DemoOptions(data=tmp_path, realtime=True, priorities=False))
    assert plain.realtime is False and plain.realtime_args == []


def test_no_realtime_on_one_cpu_where_the_console_would_get_5_percent(tmp_path):
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})  # this thread, as a one-CPU host
    try:
        assert Demo(DemoOptions(data=tmp_path, realtime=True)).realtime is False
    finally:
        os.sched_setaffinity(0, cpus)


def test_plain_priorities_leave_the_sessions_weight_alone(tmp_path):
    from kernel_tuning.autogroup import session_nice

    before = session_nice()
    demo = Demo(DemoOptions(data=tmp_path, priorities=False))
    assert demo.weigh_session() == "asked for plain priorities (--plain-priority)"
    assert demo.session_nice is None and session_nice() == before


def test_before_its_start_and_with_no_producer_answering_the_figures_are_empty(tmp_path):
    demo = Demo(DemoOptions(data=tmp_path, base_port=free_port_range(13), rate=250))
    assert demo.script_elapsed() == 0.0
    assert demo.collect_transitions() == [] and demo.fuse_snapshot() == {}
    assert demo.load_totals() == {
        "acked": 0, "errors": 0, "error_reasons": {}, "target_rate": 250.0,
        "achieved_rate": None, "recent_rate": None, "brokers_realtime": False,
        "session_nice": None, "priorities": True}


def committed(http: str, group: str, topic: str) -> int:
    doc = offsets(http, "GET", query={"group": group, "topic": topic})
    return sum(q["committed"] for q in doc["queues"])


def logs(data: Path) -> str:
    """The demo's children's logs, for a failure's message."""
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                     for p in sorted(data.glob("*.log")))


def environ_of(pid: int) -> dict[str, str]:
    """A child's environment, from /proc (which reads empty for a moment after its exec)."""
    raw = wait_for(lambda: Path(f"/proc/{pid}/environ").read_bytes(), 5, f"pid {pid}'s environ")
    return dict(kv.decode().split("=", 1) for kv in raw.split(b"\0") if b"=" in kv)


def arg(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@pytest.mark.integration
def test_a_small_demo_runs_as_its_users_and_stops_everything(tmp_path, env_kept):
    from broker_core.observe.events import read_events
    from console.demo.users import USERS

    base = free_port_range(3)
    data = tmp_path / "demo"
    demo = Demo(DemoOptions(brokers=1, rate=40, faults=False, data=data, base_port=base,
                            realtime=True))  # as `floodgate demo` asks
    try:
        assert demo.start() is demo
        cluster = demo.cluster
        # this process acts as admin, trusting the cluster's CA
        assert os.environ[ENV_CA] == str(cluster.tls_ca)
        assert os.environ["FLOODGATE_CREDENTIALS"] == str(cluster.credentials)
        assert os.environ[admin_token.ENV] == str(cluster.admin_token)
        assert set(demo.users) == set(USERS)
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in demo.users.values())
        # the clients: the group that keeps up alone, beside the brokers (SCHED_RR where
        # this user may, else the host's priority)
        fast, rest = demo.clients
        rt = demo.realtime  # allowed, on 2 CPUs or more
        assert rt is (allowed(BROKER_RT_PRIORITY) and len(os.sched_getaffinity(0)) >= 2)
        assert "--part=fast" in fast.args and "--nice=0" in fast.args
        assert (f"--realtime={BROKER_RT_PRIORITY}" in fast.args) is rt
        assert not any(a.startswith("--realtime") for a in rest.args)
        assert "--part=rest" in rest.args and f"--nice={REST_SCHED}" in rest.args
        assert f"--users={data / 'users'}" in rest.args and "--rate=40" in rest.args
        try:
            env = environ_of(rest.pid)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: exit {rest.poll()}\n{logs(data)}") from None
        assert env["FLOODGATE_CREDENTIALS"] == str(demo.users["batch"])
        # the groups that may fall behind yield a core at once to anything woken
        wait_for(lambda: os.sched_getscheduler(rest.pid) == os.SCHED_IDLE, 20,
                 "the rest of the clients in SCHED_IDLE")
        wait_for(lambda: os.sched_getscheduler(fast.pid) == (
            os.SCHED_RR if rt else os.SCHED_OTHER), 20, "billing's process beside the brokers")
        # the load: sends acknowledged once it starts (LOAD_AFTER_S after the cluster)
        acked = wait_for(lambda: demo.load_totals()["acked"], 30, "the load's first acks")
        producer = demo.producer
        argv = [str(a) for a in producer.args]
        assert (arg(argv, "--group"), arg(argv, "--key-prefix"), arg(argv, "--http-port")) == (
            DEMO_GROUP, KEY_PREFIX, str(demo.producer_port))
        assert arg(argv, "--rate") == "40" and arg(argv, "--cluster") == str(cluster.path)
        assert environ_of(producer.pid)["FLOODGATE_CREDENTIALS"] == str(demo.users["producer"])
        # the clients consume the load as their own users (the ACL on), and flood
        http = cluster.file.brokers[0].http
        for group in ("billing", "warehouse"):
            wait_for(lambda g=group: committed(http, g, DEMO_TOPIC), 30, f"{group} consuming")
        wait_for(lambda: quota(http)["throttled_total"], 30, "the flood throttled")
        totals = demo.load_totals()
        assert totals["acked"] >= acked and totals["target_rate"] == 40.0
        assert totals["achieved_rate"] > 0 and totals["brokers_realtime"] is rt
        assert os.sched_getscheduler(producer.pid) == (os.SCHED_RR if rt else os.SCHED_OTHER)
        assert totals["priorities"] is True and totals["session_nice"] is None
        assert isinstance(demo.fuse_snapshot(), dict) and demo.fuse_snapshot()
        transitions = demo.collect_transitions()  # the fuse's, kept in time order
        assert transitions == sorted(transitions, key=lambda t: t["time"])
        assert demo.script_elapsed() > 0
        cfg = demo.console_config()
        assert cfg.brokers == [("broker-1", cluster.file.brokers[0].http)]
        assert cfg.producers == [demo.producer_addr] and cfg.cluster == cluster.path
        assert cfg.title == "floodgate demo"
    finally:
        children = [p for p in (demo.producer, *demo.clients) if p is not None]
        stopped_at = time.time()
        demo.stop()
    # every process stopped by being asked to (SIGTERM), none killed after the grace: the
    # load answered what was in flight; each clients process saved its consumers' delays
    # after the stop, which it does once its groups stopped and committed. (It may still
    # read -SIGTERM: stop() signals it twice, and the second can land in its interpreter's
    # exit, after its handler is gone.)
    producer_code, *client_codes = [p.returncode for p in children]
    assert producer_code == 0 and set(client_codes) <= {0, -signal.SIGTERM}, client_codes
    for part, group in (("fast", "billing"), ("rest", "warehouse")):
        saved = data / f"consumer_delay-{part}.json"
        assert saved.stat().st_mtime >= stopped_at - 0.05, part  # (a file's clock is coarse)
        delays = json.loads(saved.read_text())
        assert sum(h["count"] for h in delays[group].values()) > 0, (part, delays)
    assert demo.producer is None and demo.clients == []
    assert all(port_free(p) for p in range(base, demo.producer_port + 1))
    for k in ENV:  # no longer the cluster's admin
        assert os.environ.get(k, "") == (env_kept[k] or "")
    notes = [e["text"] for e in read_events(data) if (e["kind"], e["source"]) == ("note", "demo")]
    assert notes == ["demo started: 1 brokers, 40 msgs/s, no faults", "demo stopped"]
    assert (data / "cluster.toml").exists() and (data / "producer.log").exists()
