"""`floodgate cluster up`: N broker processes on loopback, supervised.

Each broker is its own process (`floodgate broker serve`), so a drill can
SIGKILL one without touching the others. The supervisor writes cluster.toml,
logs every exit, restarts a broker that died when asked to (`restart=True`),
and on SIGTERM/SIGINT stops them all (SIGTERM, then SIGKILL after a grace).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from broker_core.cluster.cluster_file import BrokerEntry, ClusterFile
from broker_core.errors import BrokerError

log = logging.getLogger("floodgate.cluster")


def broker_ports(base_port: int, i: int) -> tuple[int, int]:
    """TCP and HTTP port of broker i (0-based): consecutive pairs from the base."""
    return base_port + 2 * i, base_port + 2 * i + 1


def broker_argv(
    entry: BrokerEntry, cluster: str, flush: str, segment_size: str, extra: list[str]
) -> list[str]:
    host, port = entry.addr.rsplit(":", 1)
    http_port = entry.http.rsplit(":", 1)[1]
    return [
        sys.executable,
        "-m",
        "console.cli",
        "broker",
        "serve",
        "--name",
        entry.name,
        "--data",
        entry.data,
        "--port",
        port,
        "--http-port",
        http_port,
        "--bind",
        host,
        "--cluster",
        cluster,
        "--flush",
        flush,
        "--segment-size",
        segment_size,
        *extra,
    ]


def wait_healthy(
    http_addr: str, timeout: float = 30.0, proc: subprocess.Popen | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise BrokerError(f"broker at {http_addr} exited with {proc.returncode} while starting")
        try:
            with urllib.request.urlopen(f"http://{http_addr}/healthz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise BrokerError(f"broker at {http_addr} not healthy after {timeout:g} s")


class Cluster:
    def __init__(
        self,
        n: int,
        base_port: int,
        data: Path,
        flush: str = "async",
        segment_size: str = "64M",
        name: str = "floodgate",
        bind: str = "127.0.0.1",
        extra_args: list[str] | None = None,
        log_dir: Path | None = None,
    ) -> None:
        if n < 1:
            raise BrokerError("a cluster needs at least one broker")
        self.data = Path(data)
        self.flush, self.segment_size, self.extra = flush, segment_size, extra_args or []
        self.log_dir = log_dir or self.data / "logs"
        entries = []
        for i in range(n):
            tcp, http = broker_ports(base_port, i)
            entries.append(
                BrokerEntry(
                    f"broker-{i + 1}",
                    f"{bind}:{tcp}",
                    f"{bind}:{http}",
                    str(self.data / f"broker-{i + 1}"),
                )
            )
        self.file = ClusterFile(name, entries, os.getpid())
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def path(self) -> Path:
        return self.data / "cluster.toml"

    def start_broker(self, entry: BrokerEntry) -> subprocess.Popen:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        logfile = open(self.log_dir / f"{entry.name}.log", "ab")  # noqa: SIM115 - child owns it
        proc = subprocess.Popen(
            broker_argv(entry, self.file.name, self.flush, self.segment_size, self.extra),
            stdout=logfile,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # Ctrl-C in the terminal reaches the supervisor only
        logfile.close()
        self.procs[entry.name] = proc
        return proc

    def up(self, timeout: float = 30.0) -> ClusterFile:
        self.data.mkdir(parents=True, exist_ok=True)
        try:
            for entry in self.file.brokers:
                self.start_broker(entry)
            for entry in self.file.brokers:
                wait_healthy(entry.http, timeout, self.procs[entry.name])
        except BaseException:
            self.down()
            raise
        self.file.save(self.path)
        return self.file

    def supervise(
        self,
        stop: Callable[[], bool],
        restart: bool = False,
        on_exit: Callable[[str, int], None] | None = None,
    ) -> None:
        while not stop():
            for entry in self.file.brokers:
                proc = self.procs.get(entry.name)
                if proc is None or proc.poll() is None:
                    continue
                log.warning(
                    "broker exited name=%s code=%s restart=%s", entry.name, proc.returncode, restart
                )
                if on_exit:
                    on_exit(entry.name, proc.returncode)
                del self.procs[entry.name]
                if restart:
                    self.start_broker(entry)
            time.sleep(0.2)

    def down(self, grace: float = 10.0) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
        if self.path.exists():
            self.file.supervisor_pid = None
            self.file.save(self.path)
