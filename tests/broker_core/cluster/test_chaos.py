"""`drill chaos`'s own parts (cluster.chaos), quickly: what `check_spec` refuses and says,
the history written as it happens (readable by the checker after a crash mid-run), and
the nemesis applying, recording and healing a pause or a kill of a real master (one
group of two brokers and a controller on the session's ZooKeeper; processes only, no
namespaces). The run under faults end to end: tests/integration/test_chaos_run.py; the
checker: test_chaos_checker.py."""

from __future__ import annotations

import json
import logging
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from broker_core.cluster.chaos import (
    KINDS,
    ChaosSpec,
    History,
    _apply,
    _heal_all,
    _nemesis,
    _Run,
    check_spec,
    run_chaos,
)
from broker_core.cluster.chaos_checker import load_history
from broker_core.cluster.cluster_file import ClusterFile
from broker_core.cluster.launcher import Cluster
from broker_core.cluster.members import group_entries, single_entries
from broker_core.cluster.ports import free_port_range
from broker_core.cluster.roles import broker_role
from broker_core.errors import BrokerError
from broker_core.ha.routes import routes_for
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[3]
NETNS = {"tag": "t1", "bridge": "fgbr-t1", "gateway": "10.77.0.1",
         "hosts": [{"name": "group-1-a", "netns": "fg-t1-1", "addr": "10.77.0.2", "veth": "v1"}]}


def replicated(*, zk: str = "127.0.0.1:2181", netns: dict | None = None,
               restart: bool = False, name: str = "c1") -> ClusterFile:
    """A cluster file as `cluster up --groups 2` writes it (nothing need run)."""
    return ClusterFile(name, group_entries(2, 2, 21000, Path("/nonexistent"), "127.0.0.1"),
                       zk=zk, replication="sync", netns=netns, restart=restart)


def single_copies() -> ClusterFile:
    """`cluster up --brokers 3`: no groups, no ZooKeeper."""
    return ClusterFile("c1", single_entries(3, 21000, Path("/nonexistent"), "127.0.0.1"))


def refusal(spec: ClusterFile, faults: tuple[str, ...]) -> str:
    with pytest.raises(BrokerError) as exc:
        check_spec(spec, ChaosSpec(faults=faults))
    return str(exc.value)


# -- check_spec ---------------------------------------------------------------------------------
CHOOSE = "choose from partition, isolate, loss, delay, kill, pause"


@pytest.mark.parametrize(("spec", "faults", "message"), [
    (single_copies(), ("pause",),
     "cluster c1 is not replicated: start it with `floodgate cluster up --groups G --netns`"),
    # the first thing wrong is what it says
    (single_copies(), ("bogus", "kill", "loss"),
     "cluster c1 is not replicated: start it with `floodgate cluster up --groups G --netns`"),
    (replicated(), ("pause", "flood", "crash"),
     f"unknown fault kind(s) flood, crash: {CHOOSE}"),
    (replicated(), ("Pause",), f"unknown fault kind(s) Pause: {CHOOSE}"),  # no case folding
    (replicated(), (), f"unknown fault kind(s) (none): {CHOOSE}"),
    (replicated(), ("flood", "loss"), f"unknown fault kind(s) flood: {CHOOSE}"),
    # network kinds on loopback: each named, in the order given
    (replicated(restart=True), ("pause", "delay", "kill", "partition"),
     "delay, partition need hosts of their own: start the cluster with "
     "`floodgate cluster up --netns`"),
    (replicated(), ("isolate", "kill"),
     "isolate need hosts of their own: start the cluster with `floodgate cluster up --netns`"),
    (replicated(), ("pause", "kill"),
     "kill needs a cluster that restarts its brokers: `floodgate cluster up --restart`"),
    (replicated(netns=NETNS), KINDS,
     "kill needs a cluster that restarts its brokers: `floodgate cluster up --restart`"),
], ids=["single-copies", "single-copies-first", "unknown", "case", "none", "unknown-first",
        "net-on-loopback", "net-first", "kill-no-restart", "kill-no-restart-netns"])
def test_check_spec_refuses_a_run_the_cluster_cannot_make_in_one_line(spec, faults, message):
    assert refusal(spec, faults) == message


@pytest.mark.parametrize(("spec", "faults"), [
    (replicated(), ("pause",)),  # processes only: loopback will do
    (replicated(restart=True), ("kill", "pause", "kill")),
    (replicated(netns=NETNS), ("partition", "isolate", "loss", "delay", "pause")),
    (replicated(netns=NETNS, restart=True), KINDS),
], ids=["pause", "kill-restart", "net", "all"])
def test_check_spec_accepts_what_the_cluster_can_do(spec, faults):
    check_spec(spec, ChaosSpec(faults=faults))


def test_run_chaos_refuses_before_asking_zookeeper_or_writing_anything(tmp_path):
    spec = replicated(zk="127.0.0.1:1")  # nothing answers there
    chaos = ChaosSpec(faults=("kill",), history=tmp_path / "history.jsonl", settle_timeout=1)
    with pytest.raises(BrokerError, match=r"^kill needs a cluster that restarts its brokers"):
        run_chaos(spec, chaos, tmp_path / "state")
    assert list(tmp_path.iterdir()) == []


# -- the history --------------------------------------------------------------------------------
def test_history_is_one_json_line_per_event_timed_from_its_start(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text('{"t": 0, "type": "send", "key": "k0", "seq": 0}\n')  # a run before
    h = History(path)
    try:
        fault = {"kind": "pause", "node": "group-1-a", "pid": 4242, "groups": ["group-1"]}
        h.add("nemesis", at=h.t0 + 1.23456, action="start", fault=fault)  # when it began
        h.add("nemesis", at=h.t0 - 0.25, action="stop", fault=fault)
        h.add("send", key="k3", seq=17, ordered=False)  # now
        h.add("send", key="k3", seq=18, ordered=False)
        h.flush()
        lines = path.read_text(encoding="utf-8").splitlines()
    finally:
        h.close()
    assert lines[:2] == [
        '{"t": 1.2346, "type": "nemesis", "action": "start", "fault": {"kind": "pause", '
        '"node": "group-1-a", "pid": 4242, "groups": ["group-1"]}}',
        '{"t": -0.25, "type": "nemesis", "action": "stop", "fault": {"kind": "pause", '
        '"node": "group-1-a", "pid": 4242, "groups": ["group-1"]}}']
    sends = [json.loads(line) for line in lines[2:]]
    assert [{k: v for k, v in e.items() if k != "t"} for e in sends] == [
        {"type": "send", "key": "k3", "seq": 17, "ordered": False},
        {"type": "send", "key": "k3", "seq": 18, "ordered": False}]
    assert 0 <= sends[0]["t"] <= sends[1]["t"] < 60  # the previous run's line is gone


def test_history_flushed_is_readable_while_the_run_goes_on_and_close_writes_the_rest(tmp_path):
    path = tmp_path / "history.jsonl"
    h = History(path)
    try:
        for seq in range(3):
            h.add("send", key="k", seq=seq, ordered=True)
        h.flush()
        assert [e["seq"] for e in load_history(path)] == [0, 1, 2]
        h.add("ack", key="k", seq=0, group="group-1", master="group-1-a", status="SEND_OK")
        h.flush()
        assert [e["type"] for e in load_history(path)] == ["send"] * 3 + ["ack"]
        h.add("deliver", key="k", seq=0)  # not flushed: close() writes it
    finally:
        h.close()
    assert [e["type"] for e in load_history(path)] == ["send"] * 3 + ["ack", "deliver"]
    h.close()  # twice: harmless


def test_history_events_added_from_many_threads_stay_whole_lines(tmp_path):
    h = History(tmp_path / "history.jsonl")
    start = threading.Barrier(4)

    def add(name: str) -> None:
        start.wait()
        for seq in range(500):
            h.add("deliver", key=name, seq=seq, pad="x" * (seq % 97))

    threads = [threading.Thread(target=add, args=(f"k{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    h.close()
    events = load_history(h.path)
    assert len(events) == 2000
    for i in range(4):  # each thread's events whole, in its own order
        assert [e["seq"] for e in events if e["key"] == f"k{i}"] == list(range(500))


CRASH = """
import os, signal, sys
from pathlib import Path
from broker_core.cluster.chaos import History

h = History(Path(sys.argv[1]))
for seq in range(500):
    h.add("send", key=f"k{seq % 16}", seq=seq, ordered=False)
h.flush()  # the producer's flush, once a second
for seq in range(500, 1200):  # ~50 KB more: most past the 8 KB buffers, not flushed
    h.add("send", key=f"k{seq % 16}", seq=seq, ordered=False)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_run_killed_mid_write_leaves_a_history_the_checker_reads(tmp_path):
    path = tmp_path / "history.jsonl"
    proc = subprocess.run([sys.executable, "-c", CRASH, str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    events = load_history(path)  # whole lines only: none torn for it to refuse
    assert 500 < len(events) < 1200  # what was flushed, and what the buffers let through
    assert [(e["type"], e["key"], e["seq"]) for e in events] == \
           [("send", f"k{seq % 16}", seq) for seq in range(len(events))]


# -- the nemesis against a real group -------------------------------------------------------------
@pytest.fixture
def one_group(tmp_path, zookeeper):
    """group-1-a and group-1-b (sync replication) and their controller on the session's
    ZooKeeper (the brokers' 6 s sessions: a pause of a second fails nobody over)."""
    cluster = Cluster(0, free_port_range(7), tmp_path / "cluster", segment_size="8M",
                      name=f"chaos{uuid.uuid4().hex[:8]}", groups=1, replicas=2,
                      replication="sync", zk=zookeeper.addr)
    try:
        cluster.up(timeout=60)
        yield cluster
    finally:
        cluster.down(grace=5.0)  # resumes a broker a failed test left paused


class Runs:
    """Chaos runs' state for the nemesis to act on: the cluster's real routes, a history
    in tmp_path; faults held until the run stops (fault_s 60 s), none waited for before
    (gap_s 0). Stopped, healed and closed at teardown."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.runs: list[_Run] = []
        self.threads: list[threading.Thread] = []

    def make(self, spec: ClusterFile, faults: tuple[str, ...], seed: int = 1) -> _Run:
        chaos = ChaosSpec(faults=faults, seed=seed, fault_s=(60.0, 60.0), gap_s=(0.0, 0.0))
        routes = routes_for(spec)
        history = History(self.tmp_path / f"history-{len(self.runs)}.jsonl")
        run = _Run(spec, chaos, self.tmp_path, history, routes, random.Random(seed),
                   names_by_addr={b.addr: b.name for b in spec.brokers})
        self.runs.append(run)
        return run

    def nemesis(self, run: _Run) -> threading.Thread:
        thread = threading.Thread(target=_nemesis, args=(run,), name="nemesis", daemon=True)
        self.threads.append(thread)
        thread.start()
        return thread

    def close(self) -> None:
        for run in self.runs:
            run.stop.set()
        for thread in self.threads:
            thread.join(10)
        for run in self.runs:
            _heal_all(run)
            run.routes.close()
            run.history.close()


@pytest.fixture
def runs(tmp_path):
    made = Runs(tmp_path)
    yield made
    made.close()


def state(pid: int) -> str:
    """The process's state letter in /proc (T: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def master_of(run: _Run) -> str:
    run.routes.wait(30)
    return run.routes.records["group-1"].master


def test_a_pause_stops_the_master_and_the_runs_end_resumes_it(one_group, runs):
    run = runs.make(one_group.file, ("pause",))
    master = master_of(run)
    proc, addr = one_group.procs[master], one_group.file.broker(master).addr
    fault = _apply(run, "pause")
    assert fault == {"kind": "pause", "node": master, "pid": proc.pid, "groups": ["group-1"]}
    assert run.paused == {proc.pid}
    wait_for(lambda: state(proc.pid) == "T", 5, "the master stopped")
    # stopped, it answers nobody: not paused (nor killed) a second time by a stale pid
    with pytest.raises(BrokerError) as exc:
        _apply(run, "pause")
    assert str(exc.value) == f"{master} does not say its pid"
    assert run.paused == {proc.pid}
    _heal_all(run)  # what run_chaos does whatever happened
    assert run.paused == set()
    wait_for(lambda: broker_role(addr).get("role") == "MASTER", 10, "the master serving again")
    assert state(proc.pid) != "T" and proc.poll() is None


def test_the_nemesis_records_a_pause_over_its_whole_length_and_heals_it_when_stopped(
        one_group, runs):
    run = runs.make(one_group.file, ("pause",))
    master = master_of(run)
    proc = one_group.procs[master]
    nemesis = runs.nemesis(run)
    wait_for(lambda: run.paused, 10, "a pause applied")
    wait_for(lambda: state(proc.pid) == "T", 5, "the master stopped")
    seen_stopped = time.monotonic() - run.history.t0
    assert nemesis.is_alive()  # the fault holds for fault_s, or until the run stops
    run.stop.set()
    nemesis.join(10)
    assert not nemesis.is_alive()
    wait_for(lambda: state(proc.pid) != "T", 5, "the master resumed")
    assert run.paused == set() and proc.poll() is None
    run.history.flush()
    events = load_history(run.history.path)
    fault = {"kind": "pause", "node": master, "pid": proc.pid, "groups": ["group-1"]}
    assert [(e["type"], e["action"], e["fault"]) for e in events] == [
        ("nemesis", "start", fault), ("nemesis", "stop", fault)]
    # the recorded window covers the fault: from before the signal to after the heal
    assert 0 <= events[0]["t"] <= seen_stopped and events[1]["t"] >= seen_stopped


def test_the_nemesis_kills_a_master_and_leaves_its_restart_to_the_supervisor(one_group, runs):
    run = runs.make(one_group.file, ("kill",))
    master = master_of(run)
    proc = one_group.procs[master]
    nemesis = runs.nemesis(run)
    assert proc.wait(10) == -signal.SIGKILL
    run.stop.set()
    nemesis.join(10)
    assert not nemesis.is_alive()
    run.history.flush()
    fault = {"kind": "kill", "node": master, "pid": proc.pid, "groups": ["group-1"]}
    assert [(e["type"], e["action"], e["fault"]) for e in load_history(run.history.path)] == [
        ("nemesis", "start", fault), ("nemesis", "stop", fault)]
    assert run.paused == set()  # nothing for the end of the run to resume
    other = next(b for b in one_group.file.brokers if b.name != master)
    assert one_group.procs[other.name].poll() is None  # its slave untouched


def test_a_fault_that_cannot_be_applied_is_logged_and_not_recorded(zookeeper, runs, caplog):
    # a cluster no broker ever ran in: no group has a master
    spec = replicated(zk=zookeeper.addr, name=f"chaos{uuid.uuid4().hex[:8]}")
    run = runs.make(spec, ("pause",))
    with pytest.raises(BrokerError) as exc:
        _apply(run, "pause")
    assert str(exc.value) in ("group-1 has no master now", "group-2 has no master now")
    with caplog.at_level(logging.WARNING, logger="floodgate.chaos"):
        nemesis = runs.nemesis(run)
        wait_for(lambda: caplog.records, 10, "the nemesis's warning")
        run.stop.set()
        nemesis.join(10)
    assert not nemesis.is_alive()
    assert caplog.records[0].getMessage() in (
        "nemesis: pause not applied: group-1 has no master now",
        "nemesis: pause not applied: group-2 has no master now")
    run.history.flush()
    assert load_history(run.history.path) == []
