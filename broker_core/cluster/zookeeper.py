"""A single-node ZooKeeper from Debian's `zookeeper` package, run with java directly.

`cluster up` embeds one (its data in the cluster dir) unless `--zk` names a
real ensemble; tests start a throwaway one on a free loopback port. The
package's own scripts start a quorum peer under /etc/zookeeper; we only need
`ZooKeeperServerMain` on the jars and a config of our own.

Timings (see README, "High availability"): a 100 ms tick and a session
timeout floor of 2 ticks let brokers ask for 1 s sessions, so a SIGKILLed
master's registration is gone about a second after it died.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from broker_core.errors import BrokerError

log = logging.getLogger("floodgate.zookeeper")

ZK_JAR = Path("/usr/share/java/zookeeper.jar")  # its manifest's Class-Path names netty, jute...
# a logging binding from libslf4j-java (a dependency of the package): logs to stderr
SLF4J_BINDING = Path("/usr/share/java/slf4j-simple.jar")
MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
TICK_MS = 100
MIN_SESSION_MS = 2 * TICK_MS
MAX_SESSION_MS = 60_000


class ZooKeeperError(BrokerError):
    """ZooKeeper could not be started or reached."""


def available() -> str | None:
    """Why an embedded ZooKeeper cannot run here, or None when it can."""
    if not ZK_JAR.exists():
        return f"{ZK_JAR} missing: apt-get install zookeeper (scripts/setup.sh does)"
    if not shutil.which("java"):
        return "no java on PATH: apt-get install openjdk-17-jre-headless"
    return None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def four_letter(addr: str, word: str = "ruok", timeout: float = 1.0) -> str:
    """Send a four-letter command ('ruok', 'srvr') and return the answer ('' if none)."""
    host, _, port = addr.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as s:
            s.sendall(word.encode())
            s.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return ""


class ZooKeeperServer:
    """One `ZooKeeperServerMain` process: `start()`, `stop()`, `pause()`/`resume()`.

    Data (snapshots, transaction log) live in `data_dir`; restarting on the
    same dir and port keeps every persistent node and every session that is
    renewed within its timeout.
    """

    def __init__(self, data_dir: str | os.PathLike, port: int | None = None,
                 host: str = "127.0.0.1", tick_ms: int = TICK_MS, heap_mb: int = 128) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or free_port(host)
        self.tick_ms = tick_ms
        self.heap_mb = heap_mb
        self.proc: subprocess.Popen | None = None
        self.prefix: list[str] = []  # e.g. `ip netns exec NS`: run on a host of its own

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "zoo.cfg"

    def write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "data").mkdir(exist_ok=True)
        lines = [
            f"tickTime={self.tick_ms}",
            f"dataDir={self.data_dir / 'data'}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            f"minSessionTimeout={max(MIN_SESSION_MS, 2 * self.tick_ms)}",
            f"maxSessionTimeout={MAX_SESSION_MS}",
            "maxClientCnxns=0",
            "admin.enableServer=false",  # its Jetty would take port 8080
            "4lw.commands.whitelist=ruok,srvr,stat,mntr",
            "autopurge.snapRetainCount=3",
            "autopurge.purgeInterval=1",
        ]
        self.config_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return self.config_path

    def argv(self) -> list[str]:
        classpath = str(ZK_JAR)
        if SLF4J_BINDING.exists():
            classpath += f":{SLF4J_BINDING}"
        return [
            shutil.which("java") or "java", f"-Xmx{self.heap_mb}m", "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dzookeeper.jmx.log4j.disable=true", "-cp", classpath, MAIN,
            str(self.config_path),
        ]

    def start(self, timeout: float = 30.0) -> ZooKeeperServer:
        why = available()
        if why:
            raise ZooKeeperError(why)
        self.write_config()
        logfile = open(self.data_dir / "zookeeper.log", "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen([*self.prefix, *self.argv()], stdout=logfile, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, process_group=0)
        logfile.close()
        self.wait_ready(timeout)
        log.info("zookeeper up addr=%s pid=%d data=%s", self.addr, self.proc.pid, self.data_dir)
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise ZooKeeperError(
                    f"zookeeper exited with {self.proc.returncode} while starting "
                    f"(see {self.data_dir / 'zookeeper.log'})")
            # serving, not only running: 'ruok' says imok before the server takes
            # sessions ("ZooKeeperServer not running" to the first clients)
            if "Mode: " in four_letter(self.addr, "srvr", 0.5):
                return
            time.sleep(0.05)
        raise ZooKeeperError(f"zookeeper at {self.addr} not ready after {timeout:g} s")

    def pause(self) -> None:
        """SIGSTOP: ZooKeeper unreachable (connections hang) until `resume`."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)

    def stop(self, grace: float = 5.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGCONT)  # a paused JVM cannot act on SIGTERM
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
