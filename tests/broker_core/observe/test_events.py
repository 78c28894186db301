"""The events log: appended, never rewritten, whole lines from several writers, rotated
without losing one."""

from __future__ import annotations

import json
import multiprocessing

import pytest

from broker_core.observe.events import (
    EventLog,
    count_unreadable,
    events_path_of,
    log_files,
    read_events,
)


def test_events_are_appended_with_their_time_and_read_back_by_window(tmp_path):
    now = [1000.0]
    log = EventLog(tmp_path, "console", clock=lambda: now[0])
    log.append("alert", "w WARNING lag 10", severity="warning", subject="consumer:w")
    now[0] = 1020.0
    log.append("alert", "w STALLED lag 26512", severity="critical", subject="consumer:w")
    log.append("fault", "SIGKILL master group-1-a", at=1010.0, node="group-1-a")
    got = read_events(tmp_path)
    assert [(e["time"], e["kind"], e["text"]) for e in got] == [
        (1000.0, "alert", "w WARNING lag 10"), (1010.0, "fault", "SIGKILL master group-1-a"),
        (1020.0, "alert", "w STALLED lag 26512")]
    assert got[1]["node"] == "group-1-a" and got[0]["source"] == "console"
    assert [e["time"] for e in read_events(tmp_path, since=1005, until=1015)] == [1010.0]
    assert [e["kind"] for e in read_events(tmp_path, kinds=("fault",))] == ["fault"]


def test_a_bad_kind_or_severity_is_refused_and_nothing_is_written(tmp_path):
    log = EventLog(tmp_path, "console")
    with pytest.raises(ValueError, match="kind must be one of"):
        log.append("alrt", "x")
    with pytest.raises(ValueError, match="severity must be one of"):
        log.append("alert", "x", severity="fatal")
    assert read_events(tmp_path) == []


def test_a_line_cut_short_by_a_crash_is_skipped_and_counted(tmp_path):
    log = EventLog(tmp_path, "demo", clock=lambda: 5.0)
    log.append("note", "before")
    with open(tmp_path / "events.jsonl", "ab") as f:
        f.write(b'{"time": 6.0, "kind": "no')  # the writer died mid-line
    log.append("note", "after")
    assert [e["text"] for e in read_events(tmp_path)] == ["before", "after"]
    assert count_unreadable(tmp_path) == 1


def test_rolling_keeps_every_event_up_to_the_files_kept(tmp_path):
    log = EventLog(tmp_path, "demo", clock=lambda: 1.0, max_bytes=400, keep=50)
    for i in range(60):
        log.append("note", f"event {i}")
    assert len(log_files(tmp_path)) > 5
    assert [e["text"] for e in read_events(tmp_path)] == [f"event {i}" for i in range(60)]
    small = EventLog(tmp_path / "small" / "events.jsonl", "demo", clock=lambda: 1.0,
                     max_bytes=400, keep=1)
    for i in range(60):
        small.append("note", f"event {i}")
    kept = [e["text"] for e in read_events(small.path)]
    assert kept == [f"event {i}" for i in range(60 - len(kept), 60)]  # the newest, in order


def _writer(path: str, name: str, n: int) -> None:
    log = EventLog(path, name, max_bytes=2000, keep=1000)
    for i in range(n):
        log.append("note", f"{name} {i}", subject="x" * (i % 7))


def test_writers_in_several_processes_lose_no_line_and_never_interleave(tmp_path):
    """The console, the controller and the demo append to one log while it rolls."""
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), f"w{k}", 150)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    lines = [line for f in log_files(tmp_path) for line in f.read_bytes().splitlines()]
    docs = [json.loads(line) for line in lines]  # every line whole JSON
    assert sorted(d["text"] for d in docs) == sorted(
        f"w{k} {i}" for k in range(3) for i in range(150))
    for k in range(3):  # each writer's own lines in its order, across the rolled files
        mine = [int(d["text"].split()[1]) for d in docs if d["source"] == f"w{k}"]
        assert mine == list(range(150))


def test_a_clusters_events_live_beside_its_cluster_file(tmp_path):
    (tmp_path / "cluster.toml").write_text("")
    assert events_path_of(tmp_path / "cluster.toml") == tmp_path / "events.jsonl"


def test_a_data_dir_not_made_yet_gets_its_events_file_inside(tmp_path):
    """A demo names its data dir before the cluster makes it: the log must not become
    a file of that name (then the cluster could not make its directories)."""
    EventLog(tmp_path / "demo-data", "demo").append("note", "demo started")
    assert (tmp_path / "demo-data").is_dir()
    assert [e["text"] for e in read_events(tmp_path / "demo-data")] == ["demo started"]
