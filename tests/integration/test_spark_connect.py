"""A warm Spark, for real: `floodgate spark up` starts PySpark's own Spark Connect server
under a supervisor, reports run through it with --remote (and SPARK_REMOTE) and
equal the local run row for row; `status` and `down` tell the truth about a
server that died, a supervisor that was killed, a port in use, a second `down`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from broker_core.cluster.ports import free_port_range
from tests.report_rows import differences, rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def started(*args: str, env=None) -> subprocess.Popen:
    """`floodgate ARGS` in a process of its own, while the test goes on (two JVMs at work on
    two cores: a server's start or a remote report beside the test's local run)."""
    if env is None:  # a local run unless the test asks for SPARK_REMOTE
        env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
    return subprocess.Popen([sys.executable, "-m", "console.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)  # fmt: skip


def finished(proc: subprocess.Popen, timeout: float = 600) -> subprocess.CompletedProcess:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def floodgate(*args: str, env=None, timeout: float = 600) -> subprocess.CompletedProcess:
    return finished(started(*args, env=env), timeout)


@pytest.fixture(scope="module")
def starting(tmp_path_factory):
    """A server being started by `floodgate spark up`; calling it waits for it: (url, port,
    state dir). Down at the end. Not warmed: the warm-up runs the two reports the tests
    below run first (11 s)."""
    folder = tmp_path_factory.mktemp("connect")
    port = free_port_range(1)
    up = started("spark", "up", "--port", str(port), "--dir", str(folder), "--driver-memory",
                 "1g", "--no-warm", "--json")  # fmt: skip
    ready: list = []

    def wait() -> tuple[str, int, Path]:
        if not ready:
            done = finished(up)
            assert done.returncode == 0, done.stderr
            got = json.loads(done.stdout)
            assert got["state"] == "up" and got["url"] == f"sc://localhost:{port}"
            ready.append((got["url"], port, folder))
        return ready[0]

    yield wait
    if up.returncode is None:  # never waited for (a test failed first): up, then down
        finished(up)
    floodgate("spark", "down", "--port", str(port), "--dir", str(folder))


@pytest.fixture(scope="module")
def server(starting):
    """(url, port, state dir) of the module's server, up."""
    return starting()


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    from spark_reports.generator import Double11Config, generate_double11

    root = tmp_path_factory.mktemp("log")
    start = datetime(2026, 11, 10, 23, 58, tzinfo=UTC)
    generate_double11(Double11Config(brokers=4, hours=0.1, start=start, seed=3), root)
    return root


def test_heatmap_through_connect_equals_the_local_run(starting, log, tmp_path, spark):
    from spark_reports.jobs.heatmap import HeatmapOptions, run_heatmap

    # the local run in this process's session (its JVM is started once for the suite),
    # while the server starts
    local = run_heatmap(HeatmapOptions(input=str(log), out=str(tmp_path / "local"), window_s=10),
                        spark=spark)  # fmt: skip
    url, _, _ = starting()
    done = floodgate("report", "heatmap", "--input", str(log), "--out", str(tmp_path / "remote"),
                     "--window", "10s", "--json", "--remote", url)  # fmt: skip
    assert done.returncode in (0, 1), done.stderr  # PASS or FAIL: the run itself worked
    remote = json.loads(done.stdout)
    for run in (remote, local):
        run.pop("out"), run.pop("outputs")
    # floats to 1e-9 (tests/report_rows.py: the host's vector division, now and then)
    assert not differences(remote, json.loads(json.dumps(local, default=str)))
    assert local["table"] == "latency"
    keys = ("window_start", "broker", "op")
    for name, k in (("heatmap", (*keys, "bucket")), ("percentiles", keys),
                    ("quarantine", ("ts", "broker", "op"))):  # fmt: skip
        assert not differences(rows(tmp_path / "remote" / name, k),
                               rows(tmp_path / "local" / name, k)), name
    assert not list(tmp_path.glob("*/_tmp-*")), "staging left behind"


def test_capacity_through_spark_remote_env_equals_the_local_run(server, log, tmp_path, spark):
    import argparse

    from spark_reports.jobs import capacity

    url, _, _ = server
    args = ["--input", str(log), "--target-date", "2027-11-11", "--json"]
    remote = started("report", "capacity", *args, "--out", str(tmp_path / "remote"),
                     env=dict(os.environ, SPARK_REMOTE=url))  # fmt: skip
    parser = argparse.ArgumentParser()
    capacity.add_arguments(parser)
    capacity.run(parser.parse_args([*args, "--out", str(tmp_path / "local")]), spark=spark)
    done = finished(remote)
    assert done.returncode in (0, 1), done.stderr
    plans = {name: json.loads((tmp_path / name / "capacity.json").read_text())
             for name in ("remote", "local")}  # fmt: skip
    for plan in plans.values():
        plan["inputs"].pop("versions")
    assert plans["remote"] == plans["local"]


def test_reports_share_one_session_and_a_closed_one_gives_way_to_the_next(server):
    """Generated code and Python workers are per session: reports reuse one (its id the
    same on every client); once the server closed it, the next id in turn is used."""
    from spark_reports.connect import SHARED_SESSIONS, shared_session_id

    url, _, _ = server
    # a column function, as every report's first aggregate: it asks the process's active
    # session for a setting (a closed one left active failed it)
    probe = ("import sys; from pyspark.sql import functions as F; "
             "from spark_reports.connect import connect_session; "
             "s = connect_session(sys.argv[1], 'probe'); s.range(3).agg(F.min('id')).collect(); "
             "print(s.session_id); s.stop() if sys.argv[2] == 'close' else None")  # fmt: skip

    def session_of(mode: str) -> str:
        done = subprocess.run([sys.executable, "-c", probe, url, mode], capture_output=True,
                              text=True, timeout=120, cwd=ROOT)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.split()[-1]

    ids = [shared_session_id(k) for k in range(SHARED_SESSIONS)]
    first, second = session_of("keep"), session_of("close")
    assert first == second and first in ids[:-1]
    assert session_of("keep") == ids[ids.index(first) + 1]


def test_status_up_again_and_a_port_in_use(server):
    url, port, folder = server
    st = floodgate("spark", "status", "--port", str(port), "--dir", str(folder))
    assert st.returncode == 0 and f"up at {url}" in st.stdout and "answers" in st.stdout
    again = floodgate("spark", "up", "--port", str(port), "--dir", str(folder))
    assert again.returncode == 0 and "already up" in again.stdout
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        other = taken.getsockname()[1]
        t0 = time.monotonic()
        busy = floodgate("spark", "up", "--port", str(other), "--dir", str(folder.parent / "busy"))
        assert busy.returncode == 1 and f"port {other} is in use" in busy.stderr
        assert time.monotonic() - t0 < 10 and len(busy.stderr.strip().splitlines()) == 1


def test_the_warm_up_runs_both_reports_through_the_server(server):
    """What a plain `spark up` does once the server answers (the fixture's server skipped
    it): both reports over a small generated log, through the server, which then still
    answers. In a process of its own: a Connect session left in the test's process was
    what later tests' local sessions got (and the server is gone by then)."""
    from spark_reports.connect import answers

    url, port, _folder = server
    warm = ("import sys; from console.commands.spark_cmd import warm_up; "
            "print(warm_up(sys.argv[1]))")
    done = subprocess.run([sys.executable, "-c", warm, url], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert 0 < float(done.stdout.split()[-1]) < 300
    assert answers("localhost", port)


def test_a_report_with_no_server_says_so_in_a_line(log, tmp_path):
    port = free_port_range(1)
    t0 = time.monotonic()
    done = floodgate("report", "heatmap", "--input", str(log), "--out", str(tmp_path / "o"),
                     "--remote", f"sc://localhost:{port}")  # fmt: skip
    assert done.returncode == 1 and time.monotonic() - t0 < 10
    assert done.stderr.strip().count("\n") == 0 and "no Spark Connect server answers" in done.stderr
    bad = floodgate("report", "heatmap", "--input", str(log), "--out", str(tmp_path / "o"),
                    "--remote", "http://x")  # fmt: skip
    assert bad.returncode != 0 and "expected sc://HOST:PORT" in bad.stderr


def _wait(check, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if got := check():
            return got
        time.sleep(0.5)
    raise AssertionError(f"{what} not within {timeout_s} s")


def test_a_dead_server_is_restarted_a_killed_supervisor_is_named_and_down_twice(server):
    """Last in the file: it ends the module's server."""
    from spark_reports.connect_server import read_state

    _, port, folder = server
    args = ("--port", str(port), "--dir", str(folder))
    # Spark's scratch (block manager dirs, the JVM's unpacked native libraries) lives in the
    # server's folder, not in /tmp, where it outlived every server
    assert list((folder / "scratch").glob("blockmgr-*")), list(folder.iterdir())
    try:
        first = read_state(folder)
        os.killpg(first.server_pid, signal.SIGKILL)  # the JVM dies: the supervisor starts it again

        def restarted():
            st = read_state(folder)
            return st if st and st.restarts == 1 and st.state == "up" else None

        again = _wait(restarted, 120, "the restart")
        assert again.server_pid != first.server_pid
        os.kill(again.supervisor_pid, signal.SIGKILL)  # nothing will restart it now
        st = floodgate("spark", "status", *args)
        assert st.returncode == 1 and "died" in st.stderr and "supervisor is gone" in st.stderr
    finally:
        down = floodgate("spark", "down", *args)
    assert down.returncode == 0 and "stopped" in down.stdout
    assert not (folder / "scratch").exists()  # gone with the server
    _wait(lambda: not _listening(port), 30, "the port's release")
    twice = floodgate("spark", "down", *args)
    assert twice.returncode == 0 and "nothing to stop" in twice.stdout
    none = floodgate("spark", "status", *args)
    assert none.returncode == 1 and "no Spark Connect server" in none.stderr


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
