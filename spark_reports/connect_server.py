"""A supervised Spark Connect server: `floodgate spark up|down|status`.

`up` starts a supervisor (this module's `supervise`, detached in its own
session) that runs PySpark's own `sbin/start-connect-server.sh --wait` as its
child, in the foreground, and starts it again when it dies (at most
MAX_RESTARTS in RESTART_WINDOW_S, then it gives up and says so). The
supervisor writes its state (pids, port, master, log, restarts, what it is
doing) to `state.json` in the server's folder, beside `server.log` (the JVM's)
and `supervisor.log`; `status` and `down` read it. One folder per port.

The server binds to 127.0.0.1 unless told otherwise: Spark Connect has no
authentication of its own, and whoever reaches the port runs code in its JVM.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from spark_reports.connect import DEFAULT_PORT, answers
from spark_reports.errors import ReportError

MAX_RESTARTS = 3  # within RESTART_WINDOW_S, then the supervisor gives up
RESTART_WINDOW_S = 600.0
READY_TIMEOUT_S = 120.0  # a JVM on a busy 2-core host takes 10-30 s to listen
STOP_GRACE_S = 20.0



def server_log4j2() -> str:
    """The server's log: Spark's warnings and errors with their dates, not its INFO (a
    night of reports would fill it with task lines); SparkConnectServer's start line kept."""
    from spark_reports.session import QUIET_LOG4J2

    return (QUIET_LOG4J2.replace(" = error", " = warn").replace("SYSTEM_ERR", "SYSTEM_OUT")
            .replace("%d{HH:mm:ss}", "%d{yyyy-MM-dd HH:mm:ss}")
            + "logger.connect.name = org.apache.spark.sql.connect.service.SparkConnectServer\n"
            "logger.connect.level = info\n")  # fmt: skip


def default_dir(port: int) -> Path:
    return (
        Path(os.environ.get("FLOODGATE_HOME", Path.home() / ".floodgate")) / f"spark-connect-{port}"
    )


@dataclass
class State:
    """What the supervisor last wrote: read by `status` and `down`."""

    port: int
    host: str
    master: str
    supervisor_pid: int
    server_pid: int | None = None  # the start script's process group (the JVM is in it)
    state: str = "starting"  # starting | up | restarting | failed | stopping
    started: float = field(default_factory=time.time)
    up_since: float | None = None
    restarts: int = 0
    last_exit: int | None = None
    log: str = ""

    @property
    def url(self) -> str:
        host = "localhost" if self.host in ("127.0.0.1", "0.0.0.0", "::") else self.host
        return f"sc://{host}:{self.port}"


def state_path(folder: Path) -> Path:
    return folder / "state.json"


def read_state(folder: Path) -> State | None:
    try:
        raw = json.loads(state_path(folder).read_text())
        return State(**raw)
    except (OSError, ValueError, TypeError):
        return None


def write_state(folder: Path, state: State) -> None:
    from spark_reports.output import write_atomic

    write_atomic(state_path(folder), (json.dumps(asdict(state), indent=2) + "\n").encode())


def alive(pid: int | None) -> bool:
    """Running, and not a zombie no one has waited for."""
    import psutil

    try:
        return bool(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def scratch_dir(folder: Path) -> Path:
    return folder / "scratch"


def server_command(home: Path, args) -> list[str]:
    """PySpark's start script in the foreground, with our settings."""
    from spark_reports.output import current_umask
    from spark_reports.session import local_driver_memory

    log_conf = Path(args.dir) / "log4j2.properties"
    log_conf.write_text(server_log4j2())
    # Spark's block manager and shuffle files, and the JVM's own temporary files (the
    # native libraries netty and snappy unpack), in the server's folder, which `spark
    # down` removes: in /tmp they outlived every server (blockmgr-*, spark-*, lib*.so)
    scratch = scratch_dir(Path(args.dir))
    scratch.mkdir(parents=True, exist_ok=True)
    java_opts = (f"-Duser.timezone=UTC -Dlog4j2.configurationFile=file:{log_conf} "
                 f"-Djava.io.tmpdir={scratch}")
    conf = {
        "spark.local.dir": str(scratch),
        "spark.connect.grpc.binding.address": args.host,
        "spark.connect.grpc.binding.port": str(args.port),
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.hadoop.fs.permissions.umask-mode": f"{current_umask():03o}",
        # The reports' shared session (spark_reports.connect) outlives a night's gaps.
        "spark.connect.session.manager.defaultSessionTimeout": "12h",
    }
    if args.master.startswith("local"):
        conf["spark.sql.shuffle.partitions"] = str(4 * (os.cpu_count() or 2))
    cmd = [str(home / "sbin" / "start-connect-server.sh"), "--wait", "--master", args.master,
           "--driver-memory", args.driver_memory or local_driver_memory()]  # fmt: skip
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    return cmd


def supervise(args) -> int:
    """Run the server; start it again when it dies; stop it on SIGTERM."""
    folder = Path(args.dir)
    home = spark_home()
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOG_DIR=str(folder),
               SPARK_PID_DIR=str(folder), SPARK_IDENT_STRING=f"connect-{args.port}")  # fmt: skip
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("SPARK_REMOTE", None)  # the server is the driver, not a client of another
    env.setdefault("PYSPARK_PYTHON", sys.executable)  # its Python workers: numpy, pyarrow
    state = State(port=args.port, host=args.host, master=args.master,
                  supervisor_pid=os.getpid(), log=str(folder / "server.log"))  # fmt: skip
    stopping = False
    child: subprocess.Popen | None = None

    def stop(_signum, _frame):
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            _kill_group(child.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    exits: list[float] = []
    while not stopping:
        with open(state.log, "ab") as log:
            child = subprocess.Popen(server_command(home, args), env=env, stdout=log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)  # fmt: skip
        state.server_pid, state.state = child.pid, "starting" if not exits else "restarting"
        write_state(folder, state)
        while child.poll() is None and not stopping:
            if state.state != "up" and answers("127.0.0.1" if args.host in ("0.0.0.0", "::")
                                               else args.host, args.port, 0.5):  # fmt: skip
                state.state, state.up_since = "up", time.time()
                write_state(folder, state)
            time.sleep(0.5)
        code = child.wait()
        if stopping:
            break
        now = time.time()
        exits = [t for t in exits if now - t < RESTART_WINDOW_S] + [now]
        state.last_exit, state.up_since = code, None
        if len(exits) > MAX_RESTARTS:
            state.state = "failed"
            write_state(folder, state)
            print(
                f"server exited {len(exits)} times in {RESTART_WINDOW_S:.0f} s: giving up",
                flush=True,
            )
            return 1
        state.restarts += 1
        print(f"server exited with {code}: starting it again ({state.restarts})", flush=True)
        time.sleep(min(10.0, 2.0 ** len(exits)))
    state.state = "stopping"
    write_state(folder, state)
    if child is not None:
        _wait_or_kill(child)
    state_path(folder).unlink(missing_ok=True)
    return 0


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_or_kill(child: subprocess.Popen) -> None:
    try:
        child.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        _kill_group(child.pid, signal.SIGKILL)
        child.wait()
    _kill_group(child.pid, signal.SIGKILL)  # anything the script left in its group


# --- what the commands call ---------------------------------------------------------


def status(folder: Path) -> dict:
    """The server's state in words: running (up or starting), died, failed, or none."""
    st = read_state(folder)
    if st is None:
        return {"running": False, "state": "none", "dir": str(folder)}
    sup, srv = alive(st.supervisor_pid), alive(st.server_pid)
    out = {**asdict(st), "url": st.url, "dir": str(folder), "supervisor_alive": sup,
           "server_alive": srv, "answers": answers(_probe_host(st.host), st.port)}  # fmt: skip
    if not sup and st.state != "failed":
        out["state"] = "died"  # the supervisor was killed: nothing restarts the server
    out["running"] = out["state"] in ("up", "starting", "restarting") and sup
    out["last_log"] = tail(Path(st.log), 3)
    return out


def _probe_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "::") else host


def tail(path: Path, n: int) -> list[str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.path.getsize(path) - 16384))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    return [ln for ln in lines if ln.strip()][-n:]


def up(folder: Path, port: int, host: str, master: str, driver_memory: str | None,
       wait_s: float = READY_TIMEOUT_S) -> dict:  # fmt: skip
    """Start the supervised server and wait until it answers; its status."""
    import shutil

    current = status(folder)
    if current["running"]:
        return {**current, "already": True}
    if current["state"] != "none":  # died or failed before: clear what it left
        down(folder)
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        raise ReportError("no Java runtime (java on PATH or JAVA_HOME): `make setup` installs one")
    if answers(_probe_host(host), port, 0.5):
        raise ReportError(f"port {port} is in use by another program: choose one with --port")
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "spark_reports.connect_server", "--dir", str(folder),
           "--port", str(port), "--host", host, "--master", master]  # fmt: skip
    if driver_memory:
        cmd += ["--driver-memory", driver_memory]
    root = str(Path(__file__).resolve().parents[1])
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    )
    with open(folder / "supervisor.log", "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, env=env)  # fmt: skip
    t0 = time.monotonic()
    while time.monotonic() - t0 < wait_s:
        st = status(folder)
        if st["state"] == "up":
            return {**st, "already": False, "ready_s": round(time.monotonic() - t0, 1)}
        if proc.poll() is not None or st["state"] in ("failed", "died"):
            break
        time.sleep(0.3)
    st = status(folder)
    down(folder)
    why = "; ".join(st.get("last_log") or tail(folder / "server.log", 3)
                    or tail(folder / "supervisor.log", 3)) or "no output"  # fmt: skip
    raise ReportError(
        f"the Spark Connect server did not come up within {wait_s:.0f} s: {why} "
        f"(log: {folder / 'server.log'})"
    )


def down(folder: Path) -> dict:
    """Stop the supervisor and the server; what was there (state 'none': nothing)."""
    st = read_state(folder)
    if st is None:
        return {"stopped": False, "state": "none", "dir": str(folder)}
    if alive(st.supervisor_pid):
        os.kill(st.supervisor_pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S + 5
        while alive(st.supervisor_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if alive(st.supervisor_pid):
            os.kill(st.supervisor_pid, signal.SIGKILL)
    if st.server_pid and alive(st.server_pid):  # its supervisor was gone or stuck
        _kill_group(st.server_pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while alive(st.server_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        _kill_group(st.server_pid, signal.SIGKILL)
    state_path(folder).unlink(missing_ok=True)
    shutil.rmtree(scratch_dir(folder), ignore_errors=True)
    return {"stopped": True, "state": st.state, "url": st.url, "dir": str(folder)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="connect_server", description="supervise a Spark Connect server"
    )
    p.add_argument("--dir", required=True)
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--master", default="local[*]")
    p.add_argument("--driver-memory", default=None)
    return supervise(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
