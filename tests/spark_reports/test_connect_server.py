"""The Spark Connect server's supervision without a JVM: the server's command line and
log settings, the state file `status` and `down` read, what they say of a supervisor
that died or a port in use, and `down` stopping real processes by the pids the state
names. The server itself (10-30 s of JVM) is started by tests/integration/
test_spark_connect.py only."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
from dataclasses import asdict
from pathlib import Path

import psutil
import pytest

from spark_reports import connect_server as cs
from spark_reports.errors import ReportError
from tests.waiting import wait_for


@pytest.fixture
def listening():
    """A loopback port something accepts connections on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.fixture
def procs():
    """Start real processes for a test; each is killed and reaped at its end."""
    started: list[subprocess.Popen] = []

    def start(*argv: str, group: bool = False) -> subprocess.Popen:
        p = subprocess.Popen(list(argv), start_new_session=group, stdin=subprocess.DEVNULL)
        started.append(p)
        return p

    yield start
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


def gone_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def state(folder: Path, **kw) -> cs.State:
    folder.mkdir(parents=True, exist_ok=True)
    st = cs.State(**{"port": 15999, "host": "127.0.0.1", "master": "local[*]",
                     "supervisor_pid": gone_pid(), "log": str(folder / "server.log"), **kw})
    cs.write_state(folder, st)
    return st


def test_the_url_names_localhost_for_loopback_and_wildcard_binds():
    def url(host: str) -> str:
        return cs.State(15002, host, "local[*]", 1).url

    assert url("127.0.0.1") == url("0.0.0.0") == url("::") == "sc://localhost:15002"
    assert url("10.1.2.3") == "sc://10.1.2.3:15002"


def test_one_folder_per_port_under_floodgate_home(monkeypatch, tmp_path):
    monkeypatch.setenv("FLOODGATE_HOME", str(tmp_path))
    assert cs.default_dir(15002) == tmp_path / "spark-connect-15002"
    assert cs.default_dir(15003) != cs.default_dir(15002)
    monkeypatch.delenv("FLOODGATE_HOME")
    assert cs.default_dir(7) == Path.home() / ".floodgate" / "spark-connect-7"


def test_the_state_reads_back_as_written_and_anything_else_reads_as_none(tmp_path):
    assert cs.read_state(tmp_path) is None  # none written
    st = cs.State(15002, "127.0.0.1", "local[2]", 42, server_pid=43, state="up",
                  up_since=1.5, restarts=2, last_exit=137, log="/x/server.log")
    cs.write_state(tmp_path, st)
    assert cs.read_state(tmp_path) == st
    assert json.loads(cs.state_path(tmp_path).read_text()) == asdict(st)
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temp file left
    cs.state_path(tmp_path).write_text('{"port": 1, "host"')  # cut short mid-write
    assert cs.read_state(tmp_path) is None
    cs.state_path(tmp_path).write_text(json.dumps({**asdict(st), "colour": "red"}))
    assert cs.read_state(tmp_path) is None  # a field no State has
    cs.state_path(tmp_path).write_text("[1, 2]")
    assert cs.read_state(tmp_path) is None


def test_alive_means_running_not_a_zombie_nor_reaped():
    assert cs.alive(os.getpid())
    assert not cs.alive(None) and not cs.alive(0)
    child = subprocess.Popen(["true"])
    try:
        wait_for(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE, 5,
                 "the child exited, not yet waited for", ignore=(psutil.Error,))
        assert not cs.alive(child.pid)
    finally:
        child.wait()
    assert not cs.alive(child.pid)


def test_tail_gives_the_last_lines_that_say_something(tmp_path):
    log = tmp_path / "server.log"
    assert cs.tail(log, 3) == []  # no log yet
    log.write_text("one\n\ntwo\n   \nthree\nfour\n\n")
    assert cs.tail(log, 3) == ["two", "three", "four"]
    assert cs.tail(log, 10) == ["one", "two", "three", "four"]
    # a long log: only its end is read (a night of warnings must not be read whole)
    log.write_bytes(b"old\n" + b"x" * 20_000 + b"\nlast \xff line\n")
    lines = cs.tail(log, 5)
    assert lines[-1] == "last \ufffd line" and "old" not in lines


def test_the_server_log_keeps_warnings_with_their_dates_and_the_start_line():
    conf = cs.server_log4j2()
    assert "rootLogger.level = warn" in conf and "= error" not in conf
    assert "target = SYSTEM_OUT" in conf and "SYSTEM_ERR" not in conf
    assert "%d{yyyy-MM-dd HH:mm:ss}" in conf
    assert ("logger.connect.name = org.apache.spark.sql.connect.service.SparkConnectServer\n"
            "logger.connect.level = info\n") in conf


def server_args(folder: Path, master: str = "local[*]", memory: str | None = None,
                host: str = "127.0.0.1", port: int = 15123) -> argparse.Namespace:
    return argparse.Namespace(dir=str(folder), host=host, port=port, master=master,
                              driver_memory=memory)


def confs(cmd: list[str]) -> dict[str, str]:
    return dict(cmd[i + 1].split("=", 1) for i, a in enumerate(cmd) if a == "--conf")


def test_the_server_command_runs_pysparks_script_in_the_foreground_with_our_settings(tmp_path):
    from spark_reports.output import current_umask
    from spark_reports.session import local_driver_memory

    home = tmp_path / "pyspark"
    folder = tmp_path / "server"
    folder.mkdir()
    cmd = cs.server_command(home, server_args(folder, host="0.0.0.0"))
    assert cmd[:4] == [str(home / "sbin" / "start-connect-server.sh"), "--wait", "--master",
                       "local[*]"]
    assert cmd[cmd.index("--driver-memory") + 1] == local_driver_memory()
    conf = confs(cmd)
    scratch = folder / "scratch"
    assert scratch.is_dir() and conf["spark.local.dir"] == str(scratch)
    assert (conf["spark.connect.grpc.binding.address"],
            conf["spark.connect.grpc.binding.port"]) == ("0.0.0.0", "15123")
    log_conf = folder / "log4j2.properties"
    assert log_conf.read_text() == cs.server_log4j2()
    java = conf["spark.driver.extraJavaOptions"].split()
    assert set(java) == {"-Duser.timezone=UTC", f"-Dlog4j2.configurationFile=file:{log_conf}",
                         f"-Djava.io.tmpdir={scratch}"}
    assert conf["spark.sql.session.timeZone"] == "UTC" and conf["spark.ui.enabled"] == "false"
    assert conf["spark.hadoop.fs.permissions.umask-mode"] == f"{current_umask():03o}"
    assert conf["spark.connect.session.manager.defaultSessionTimeout"] == "12h"
    assert conf["spark.sql.shuffle.partitions"] == str(4 * (os.cpu_count() or 2))


def test_a_cluster_master_keeps_its_own_shuffle_partitions_and_takes_the_memory_given(tmp_path):
    cmd = cs.server_command(tmp_path, server_args(tmp_path, "spark://h:7077", "6g"))
    assert cmd[cmd.index("--master") + 1] == "spark://h:7077"
    assert cmd[cmd.index("--driver-memory") + 1] == "6g"
    assert "spark.sql.shuffle.partitions" not in confs(cmd)


def test_status_of_nothing_and_of_a_server_up(tmp_path, listening):
    assert cs.status(tmp_path / "none") == {"running": False, "state": "none",
                                            "dir": str(tmp_path / "none")}
    folder = tmp_path / "up"
    state(folder, port=listening, supervisor_pid=os.getpid(), server_pid=os.getpid(),
          state="up", host="0.0.0.0")
    Path(folder / "server.log").write_text("started\n\nSparkConnectServer: listening\n")
    st = cs.status(folder)
    assert st["running"] and st["state"] == "up" and st["answers"]  # probed on loopback
    assert st["supervisor_alive"] and st["server_alive"]
    assert st["url"] == f"sc://localhost:{listening}" and st["dir"] == str(folder)
    assert st["last_log"] == ["started", "SparkConnectServer: listening"]


def test_status_says_died_when_the_supervisor_is_gone_and_keeps_failed(tmp_path):
    state(tmp_path / "a", state="up", server_pid=gone_pid())
    died = cs.status(tmp_path / "a")
    assert died["state"] == "died" and not died["running"]
    assert not died["supervisor_alive"] and not died["server_alive"] and not died["answers"]
    assert died["last_log"] == []
    state(tmp_path / "b", state="failed", restarts=3)
    failed = cs.status(tmp_path / "b")
    assert failed["state"] == "failed" and not failed["running"] and failed["restarts"] == 3
    state(tmp_path / "c", state="restarting", supervisor_pid=os.getpid())
    assert cs.status(tmp_path / "c")["running"]  # between two starts: still running


def test_down_of_nothing_says_so(tmp_path):
    assert cs.down(tmp_path) == {"stopped": False, "state": "none", "dir": str(tmp_path)}


def test_down_stops_the_supervisor_and_a_server_group_left_behind(tmp_path, procs):
    folder = tmp_path / "srv"
    supervisor = procs("sleep", "60")
    server = procs("sleep", "60", group=True)  # the start script's group, the JVM in it
    state(folder, supervisor_pid=supervisor.pid, server_pid=server.pid, state="up",
          port=15444)
    cs.scratch_dir(folder).mkdir()
    (cs.scratch_dir(folder) / "blockmgr-1").mkdir()
    (folder / "server.log").write_text("a line\n")
    got = cs.down(folder)
    assert got == {"stopped": True, "state": "up", "url": "sc://localhost:15444",
                   "dir": str(folder)}
    assert supervisor.wait(5) == -signal.SIGTERM  # asked to stop, not killed
    assert server.wait(5) == -signal.SIGTERM
    assert not cs.state_path(folder).exists() and not cs.scratch_dir(folder).exists()
    assert (folder / "server.log").exists()  # the logs outlive the server
    assert cs.down(folder)["stopped"] is False  # a second down: nothing to stop


def test_up_when_running_reports_the_server_already_there(tmp_path, listening):
    state(tmp_path, port=listening, supervisor_pid=os.getpid(), state="up")
    got = cs.up(tmp_path, listening, "127.0.0.1", "local[*]", None, wait_s=1)
    assert got["already"] is True and got["state"] == "up"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]  # nothing started


def test_up_refuses_a_port_in_use_after_clearing_what_a_dead_server_left(tmp_path, listening):
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.skip("the port is checked after the Java runtime")
    folder = tmp_path / "srv"
    state(folder, state="up")  # its supervisor died
    cs.scratch_dir(folder).mkdir()
    with pytest.raises(ReportError, match=f"^port {listening} is in use by another program: "
                                          f"choose one with --port$"):
        cs.up(folder, listening, "127.0.0.1", "local[*]", None, wait_s=1)
    assert not cs.state_path(folder).exists() and not cs.scratch_dir(folder).exists()
    assert not (folder / "supervisor.log").exists()  # no supervisor was started
    with pytest.raises(ReportError, match="in use"):
        cs.up(tmp_path / "new", listening, "0.0.0.0", "local[*]", None, wait_s=1)
    assert not (tmp_path / "new").exists()


def test_up_without_a_java_runtime_says_how_to_get_one(tmp_path, monkeypatch):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(ReportError, match="no Java runtime .*`make setup` installs one"):
        cs.up(tmp_path / "srv", 1, "127.0.0.1", "local[*]", None, wait_s=1)
    assert not (tmp_path / "srv").exists()


def test_the_supervisors_command_line_needs_its_folder(capsys):
    with pytest.raises(SystemExit) as exit_:
        cs.main(["--port", "15002"])
    assert exit_.value.code == 2 and "--dir" in capsys.readouterr().err
