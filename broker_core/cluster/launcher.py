"""`floodgate cluster up`: N broker processes on loopback, supervised.

Who the cluster is made of, the command lines that start them and the security they are
given live in cluster.members; this module starts, watches and stops them.

Each broker is its own process (`python -m broker_core broker`), so a drill can
SIGKILL one without touching the others. The supervisor writes cluster.toml,
logs every exit, restarts a broker that died when asked to (`restart=True`),
on SIGHUP reads cluster.toml again, starting the brokers added to it and stopping
those taken out (`cluster add-replica`, `remove-replica`), and on SIGTERM/SIGINT
stops them all (SIGTERM, then SIGKILL after a grace).

A replicated cluster (`groups=G, replicas=R`) is G groups of R brokers, a
controller and, unless `zk` names one, an embedded single-node ZooKeeper
with its data in the cluster dir; `up` returns once every group has a master.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from broker_core.acl import tls
from broker_core.cluster.child_exits import ExitWatch
from broker_core.cluster.cluster_file import BrokerEntry, ClusterFile, load_cluster
from broker_core.cluster.health import wait_healthy
from broker_core.cluster.members import (
    broker_argv,
    controller_argv,
    group_entries,
    ports_taken,
    secure,
    single_entries,
    with_grpc,
)
from broker_core.errors import BrokerError

log = logging.getLogger("floodgate.cluster")


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
        *,
        groups: int | None = None,
        replicas: int = 2,
        replication: str = "async",
        zk: str | None = None,
        controllers: int = 1,
        netns: bool = False,
        acl: bool = False,
        tls: bool = False,
        consensus: str = "controller",
        grpc: bool = False,
        grpc_trace_rate: float = 0.0,
    ) -> None:
        """`netns`: every broker, the embedded ZooKeeper and each controller on a host
        of its own (cluster.netns), so that network faults can come between them.
        `acl`: brokers take authenticated users only; a super user `admin` with a random
        secret is written to `admin.credentials.toml` (mode 0600) beside the cluster
        file, which names it; the controllers use it. The admin endpoints take a random
        token only (`admin.token`, mode 0600, named by the cluster file: acl.admin_token).
        `tls`: a local CA and a broker certificate in `tls/` (acl.tls.make_certs); every
        port speaks TLS; the cluster file names the CA (`tls_ca`).
        `consensus="raft"`: each group elects its leader itself (broker_core.raft): no
        ZooKeeper, no controller; their log is the CommitLog's bytes, replicated as a
        master's (raft.stream_group). `grpc`: each broker also serves RocketMQ 5's gRPC
        protocol (broker_core.grpc_front), on ports after all the others, tracing
        `grpc_trace_rate` of its clients' sends."""
        if n < 1 and not groups:
            raise BrokerError("a cluster needs at least one broker")
        self.data = Path(data)
        self.flush, self.segment_size, self.extra = flush, segment_size, extra_args or []
        if grpc and grpc_trace_rate:
            self.extra = [*self.extra, "--grpc-trace-rate", f"{grpc_trace_rate:g}"]
        self.log_dir = log_dir or self.data / "logs"
        # one metrics log for the whole cluster (each broker's files carry its name), so a
        # report reads the cluster's night with one --input
        self.metrics_dir = self.data / "metrics"
        self.replication, self.n_controllers = replication, controllers
        self.zookeeper = None  # the embedded one, when zk is not given
        raft = bool(groups) and consensus == "raft"
        if raft and (zk or replicas < 3):
            raise BrokerError("--consensus raft takes no ZooKeeper and 3 or more replicas "
                              "(with two, losing one stops the group)")
        if groups:
            entries = group_entries(groups, replicas, base_port, self.data, bind)
            if zk is None and not raft:
                from broker_core.cluster.zookeeper import ZooKeeperServer

                self.zookeeper = ZooKeeperServer(self.data / "zookeeper",
                                                 base_port + 3 * len(entries), bind)
                zk = self.zookeeper.addr
        else:
            entries = single_entries(n, base_port, self.data, bind)
        if grpc:  # (ports past every other: ZooKeeper's is the last of those)
            entries = with_grpc(entries, base_port + ports_taken(
                0 if groups else n, groups or 0, replicas) + 1)
        self.layout = None
        self.reaper: subprocess.Popen | None = None
        if netns:
            entries, zk = self._on_hosts(entries, zk, controllers)
        self.file = ClusterFile(name, entries, os.getpid(), zk or "",
                                replication if groups else "",
                                self.layout.to_dict() if self.layout else None)
        self.file.consensus = "raft" if raft else ""
        self.procs: dict[str, subprocess.Popen] = {}
        self.controllers: dict[str, subprocess.Popen] = {}
        self.exits = ExitWatch()  # supervise() sleeps on it; stop_supervising() wakes it
        self._reload = False  # set by reload() (SIGHUP), acted on by supervise()
        security = secure(self.data, self.file, bind, tls, acl)
        self.extra = [*self.extra, *security.args]
        self.tls_ca, self.credentials = security.tls_ca, security.credentials
        self.admin_token = security.admin_token

    def _on_hosts(self, entries: list[BrokerEntry], zk: str | None,
                  controllers: int) -> tuple[list[BrokerEntry], str | None]:
        """Make a namespace per node and move each broker (and ZooKeeper) to its
        host's address; the same ports."""
        from dataclasses import replace

        from broker_core.cluster import netns
        from broker_core.cluster.netns_reaper import start_reaper

        nodes = [e.name for e in entries]
        if self.zookeeper is not None:
            nodes.append("zookeeper")
        nodes += [f"controller-{i + 1}" for i in range(controllers if zk else 0)]
        self.layout = netns.create(nodes)
        self.data.mkdir(parents=True, exist_ok=True)
        self.reaper = start_reaper(self.layout, os.getpid(), self.data / "netns.json")

        def moved(addr: str, host: str) -> str:
            return f"{host}:{addr.rsplit(':', 1)[1]}" if addr else ""

        hosts = self.layout.hosts
        entries = [replace(e, addr=moved(e.addr, hosts[e.name].addr),
                           http=moved(e.http, hosts[e.name].addr),
                           ha=moved(e.ha, hosts[e.name].addr)) for e in entries]
        if self.zookeeper is not None:
            self.zookeeper.host = hosts["zookeeper"].addr
            self.zookeeper.prefix = self.layout.exec_prefix("zookeeper")
            zk = self.zookeeper.addr
        return entries, zk

    def _prefix(self, node: str) -> list[str]:
        return self.layout.exec_prefix(node) if self.layout else []

    @property
    def path(self) -> Path:
        return self.data / "cluster.toml"

    def start_broker(self, entry: BrokerEntry) -> subprocess.Popen:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        logfile = open(self.log_dir / f"{entry.name}.log", "ab")  # noqa: SIM115 - child owns it
        extra = [*self.extra, "--metrics-dir", str(self.metrics_dir),
                 *(["--admin-from", self.layout.gateway] if self.layout else []),
                 *(["--grpc-routes", str(self.path.resolve())] if entry.grpc else [])]
        proc = subprocess.Popen(
            [*self._prefix(entry.name),
             *broker_argv(entry, self.file.name, self.flush, self.segment_size, extra,
                          self.file.zk, self.replication,
                          self.file.groups[entry.group] if self.file.raft else None)],
            stdout=logfile,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            # its own process group: Ctrl-C in the terminal reaches the supervisor only;
            # the same session: Linux's scheduler autogroup (one per session) keeps the
            # cluster one workload, within which nice levels order its processes
            process_group=0,
        )
        logfile.close()
        self.procs[entry.name] = proc
        return proc

    def start_controller(self, name: str) -> subprocess.Popen:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        logfile = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - child owns it
        env = None
        if self.credentials is not None or self.tls_ca is not None:
            env = {**os.environ,
                   **({"FLOODGATE_CREDENTIALS": str(self.credentials)} if self.credentials
                      else {}),
                   **({tls.ENV_CA: str(self.tls_ca)} if self.tls_ca else {})}
        proc = subprocess.Popen([*self._prefix(name),
                                 *controller_argv(self.file.zk, self.file.name, name,
                                                 self.data.resolve() / "events.jsonl")],
                                stdout=logfile, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, process_group=0, env=env)
        logfile.close()
        self.controllers[name] = proc
        return proc

    def _controllers_alive(self) -> None:
        for name, proc in self.controllers.items():
            if proc.poll() is not None:
                raise BrokerError(f"controller {name} exited with {proc.returncode} "
                                  f"(see {self.log_dir / (name + '.log')})")

    def up(self, timeout: float = 30.0) -> ClusterFile:
        self.data.mkdir(parents=True, exist_ok=True)
        if self.credentials is not None and not self.credentials.exists():
            import secrets

            from broker_core.acl.credentials import Credentials, write

            write(self.credentials, Credentials("admin", secrets.token_urlsafe(24)))
        if self.admin_token is not None:
            from broker_core.acl import admin_token

            admin_token.make(self.admin_token)
        try:
            if self.zookeeper is not None:
                self.zookeeper.start()
            if self.file.zk:
                for i in range(self.n_controllers):
                    self.start_controller(f"controller-{i + 1}")
            for entry in self.file.brokers:
                self.start_broker(entry)
            for entry in self.file.brokers:
                wait_healthy(entry.http, timeout, self.procs[entry.name],
                             str(self.tls_ca) if self.tls_ca else None,
                             self.log_dir / f"{entry.name}.log")
            if self.file.raft:
                from broker_core.ha.routes import routes_for

                routes = routes_for(self.file)  # every group's members elected a leader
                try:
                    routes.wait(timeout)
                finally:
                    routes.close()
            elif self.file.replicated:
                from broker_core.cluster.roles import wait_masters

                wait_masters(self.file, timeout, check=self._controllers_alive)
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
        """Until `stop()`: report (with `restart`, start again) each broker that exits; read
        the cluster file again on `reload` (SIGHUP, when run in the main thread as `up`'s)."""
        if threading.current_thread() is threading.main_thread():
            # left in place after this returns: a SIGHUP while `down` stops the brokers
            # must not end this process half way (SIGHUP's default)
            signal.signal(signal.SIGHUP, lambda *_: self.reload())
        while not stop():
            if self._reload:
                self._reload = False
                self._take_file()
            for entry in self.file.brokers:
                proc = self.procs.get(entry.name)
                if proc is None or proc.poll() is None:
                    continue
                log.warning("broker exited name=%s code=%s restart=%s", entry.name,
                            proc.returncode, restart)
                if on_exit:
                    on_exit(entry.name, proc.returncode)
                del self.procs[entry.name]
                if restart:
                    self.start_broker(entry)
            for name, proc in list(self.controllers.items()):
                if proc.poll() is not None:
                    log.warning("controller exited name=%s code=%s restart=%s", name,
                                proc.returncode, restart)
                    del self.controllers[name]
                    if restart:
                        self.start_controller(name)
            if not stop():  # asleep until a child exits or stop_supervising()
                self.exits.wait([*self.procs.values(), *self.controllers.values()])

    def stop_supervising(self) -> None:
        """Wake `supervise` to look at its `stop` (set it first)."""
        self.exits.wake()

    def reload(self) -> None:
        """Have `supervise` read the cluster file again at its next turn (safe from a
        signal handler: a flag and a wake, the work is the loop's)."""
        self._reload = True
        self.exits.wake()

    def _take_file(self, grace: float = 10.0) -> None:
        """The cluster file as it is now: a broker for each entry added to it, those of the
        entries taken out stopped. An entry that was there before is left as it is (one
        whose broker exited is started again by `restart` only)."""
        try:
            new = load_cluster(self.path)
        except BrokerError as exc:
            log.warning("cluster file not reloaded: %s", exc)
            return
        new.supervisor_pid = self.file.supervisor_pid
        before = {b.name for b in self.file.brokers}
        gone = [self.procs.pop(name) for name in before - {b.name for b in new.brokers}
                if name in self.procs]
        self.file = new  # start_broker gives an added member its group's members from here
        added = [b for b in new.brokers if b.name not in before and b.name not in self.procs]
        for entry in added:
            if self.layout is not None and entry.name not in self.layout.hosts:
                log.warning("broker not started name=%s: no host for it", entry.name)
                continue
            self.start_broker(entry)
        log.info("cluster file reloaded: started %s; stopping %d broker(s)",
                 ", ".join(b.name for b in added) or "none", len(gone))
        self._stop(gone, grace)

    @staticmethod
    def _stop(procs: list[subprocess.Popen], grace: float) -> None:
        """SIGTERM (and SIGCONT: a drill may have paused one), SIGKILL after `grace`."""
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def down(self, grace: float = 10.0) -> None:
        # brokers and controllers together: stopping controllers first would leave
        # masters that leave unreplaced, stopping brokers first makes failovers
        self._stop([*self.procs.values(), *self.controllers.values()], grace)
        self.procs.clear()
        self.controllers.clear()
        if self.zookeeper is not None:
            self.zookeeper.stop()
        if self.layout is not None:
            self._remove_hosts()
        if self.path.exists():
            self.file.supervisor_pid = None
            self.file.save(self.path)

    def _remove_hosts(self) -> None:
        from broker_core.cluster import netfault, netns

        netfault.heal(self.layout, self.data)
        left = netns.destroy(self.layout)
        (self.data / "netns.json").unlink(missing_ok=True)  # the reaper's cue to exit
        if self.reaper is not None:
            try:
                self.reaper.wait(2)
            except subprocess.TimeoutExpired:
                self.reaper.kill()
        self.layout = None
        self.file.netns = None
        if left:
            log.warning("namespaces left behind: %s", "; ".join(left))
