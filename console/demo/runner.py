"""`floodgate demo`: a local cluster under load with a fault script, for the console.

Pieces, all stopped by `Demo.stop()` in reverse order:
- the cluster: `broker_core.cluster.launcher.Cluster`, one process per broker; with
  `groups` (`make demo`: 4) replicated, each group a master and a slave with sync
  replication, a controller and an embedded ZooKeeper (the producer sends to masters
  through the routes, and the fuse judges groups);
- a fuse-enabled producer (`floodgate bench produce` in a process of its own: its
  loop must not share a GIL with the console), serving its own /stats and /metrics
  for the console's Fuse screen and this runner's fuse transitions and totals;
- consumer groups (one healthy, one that slows, hangs and recovers) and a producer
  group flooding past its quota (`console.demo.clients`, two processes);
- the fault script (`console.demo.script`, repeated every `CYCLE_S`), played by
  `console.demo.faults` through the brokers' admin endpoints.
Only a data directory the demo created itself is removed at the end.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from broker_core.cluster.ports import port_free
from console.demo.clients import PARTS as CLIENT_PARTS
from console.demo.faults import FaultPlayer
from console.demo.script import DEMO_TOPIC, FaultAction

log = logging.getLogger("floodgate.demo")

DEMO_GROUP = "demo-app"  # the demo producer's group (brokers' quotas see it)
# The load starts this long after the cluster is up, the console's, clients' and producer's
# starts (imports, TLS, sign-ins: both cores for a second or two) done meanwhile: sends on a
# starved slave were answered SYSTEM_BUSY, every group isolated before any fault.
LOAD_AFTER_S = 3.0
# The console's thread runs at this nice level (masters' send p99 8-11 -> 5-6 ms). The
# groups that may fall behind (clients.PARTS "rest") run under SCHED_IDLE: at nice 10 the
# fair scheduler let them finish a slice before a woken broker ran; an idle-class task is
# preempted at once (bench/README.md, System cost, 2026-11-30 fourth stop). Not the
# console: idle-class, it would freeze on a saturated host.
CONSOLE_NICE = 10
REST_SCHED = "idle"
# Nice orders who runs next, not how soon. Where the user may, a message's path (the load,
# the brokers, billing: clients.PARTS "fast") runs under SCHED_RR at this one priority and
# preempts the rest at once: billing's send -> in hand p99 5.1-10.1 -> 3.3-5.1 ms, ~1 of 2
# cores real-time at 5,000 msgs/s (docs/topics/console.md; bench/README.md, System cost,
# 2026-12-01). Billing left in the fair class fell 8,000-29,000 messages behind.
BROKER_RT_PRIORITY = 1
# Where the kernel shares the CPU between sessions first (autogroups), an operator's
# `floodgate status` and `trace` from another terminal weighed as much as the whole demo:
# the fault-free masters' worst send in those seconds 9-20 ms. With the demo's session at
# this autogroup nice level, 4.9-8.4 ms (bench/README.md, 2026-11-28). Within the session
# nothing changes; restored when the demo stops.
SESSION_NICE = -10
KEY_PREFIX = "order-"  # the demo's n-th message is keyed order-n (`floodgate trace --key`)


@dataclass
class DemoOptions:
    brokers: int = 6
    rate: float = 1000.0
    faults: bool = True
    data: Path | None = None  # kept; None = a temporary directory removed at the end
    base_port: int = 20900
    size: int = 128
    groups: int = 0  # > 0: replicated groups of master + slave (sync) instead of `brokers`
    clients: bool = True  # consumer groups and a throttled producer (console.demo.clients)
    # share of the demo's sends traced (and of deliveries the consumer groups report):
    # every message, so any key order-N can be looked up in the console's trace screen
    trace_rate: float = 1.0  # (the RocketMQ app's sends: the brokers sample them)
    acl: bool = True  # brokers take users only; each client its own (console.demo.users)
    tls: bool = True  # every broker port speaks TLS (a local CA in the data dir)
    # the load, the brokers and billing under SCHED_RR if allowed (`floodgate demo` asks)
    realtime: bool = False
    # False: no SCHED_RR, no nice level for the console, no idle class for the clients
    # (REST_SCHED), no session weighting: every part at the host's priority
    priorities: bool = True
    rocketmq: bool = True  # with the clients: a RocketMQ application (rocketmq_clients)


@dataclass
class Demo:
    opts: DemoOptions
    actions: list[FaultAction] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._made_data: Path | None = None
        if self.opts.data is None:  # made now, so its log can be named before the start
            self._made_data = Path(tempfile.mkdtemp(prefix="floodgate-demo-"))
        self.cluster = self.producer = self.routes = None  # routes: replicated, who is master
        self.clients: list[subprocess.Popen] = []  # console.demo.clients: fast, the rest
        self.users: dict[str, Path] = {}  # the ACL's users: name -> credentials file
        self._env_before: dict | None = None  # the ACL and TLS settings before the demo's
        self._session_nice_before: int | None = None  # the session's weight before the demo's
        self.session_nice: int | None = None  # its autogroup nice while the demo runs
        self._threads: list[threading.Thread] = []
        self._transitions: dict[tuple, dict] = {}
        self._script_start: float | None = None  # monotonic: the fault script's cycle began
        self.events = None  # observe.events.EventLog in the data dir, once started
        self.fault_player = FaultPlayer(self)  # the script's acts (console.demo.faults)

    @property
    def producer_port(self) -> int:
        from broker_core.cluster.members import ports_taken

        o = self.opts  # the first port after the cluster's (replicated: 2 brokers a group)
        return o.base_port + ports_taken(o.brokers, o.groups, replicas=2)

    @property
    def realtime(self) -> bool:
        """Whether the load, the brokers and billing run under SCHED_RR: asked for, with
        priorities, allowed, on 2 CPUs or more (it takes ~1 core at 5,000 msgs/s: on one,
        the console would get the kernel's reserved 5 %)."""
        from kernel_tuning.realtime import allowed

        return (self.opts.realtime and self.opts.priorities and allowed(BROKER_RT_PRIORITY)
                and len(os.sched_getaffinity(0)) >= 2)

    @property
    def realtime_args(self) -> list[str]:
        return ["--realtime", str(BROKER_RT_PRIORITY)] if self.realtime else []

    # --- start ---------------------------------------------------------------------
    def weigh_session(self) -> str | None:
        """The demo's session (its processes and the terminal's) weighted at SESSION_NICE
        against the host's other sessions; None once done, else why not, in a phrase."""
        from kernel_tuning.autogroup import session_nice, set_session_nice

        if not self.opts.priorities:
            return "asked for plain priorities (--plain-priority)"
        before = session_nice()
        if before is None:
            return "this kernel has no autogroups"
        if before <= SESSION_NICE:  # weighted as much already
            self.session_nice = before
            return None
        why = set_session_nice(SESSION_NICE)
        if why is None:
            self._session_nice_before, self.session_nice = before, SESSION_NICE
        return why

    def start(self) -> Demo:
        from broker_core.client.admin import ensure_topic
        from broker_core.cluster.launcher import Cluster

        o = self.opts
        busy = [p for p in range(o.base_port, self.producer_port + 1) if not port_free(p)]
        if busy:
            from console.errors import CommandFailed

            if self._made_data is not None:  # nothing started: its log's directory goes too
                shutil.rmtree(self._made_data, ignore_errors=True)
                self._made_data = None
            raise CommandFailed(f"port(s) {', '.join(map(str, busy[:5]))} in use: "
                                f"pick another --base-port")
        data = o.data or self._made_data
        from broker_core.observe.events import EventLog

        self.events = EventLog(data, "demo")
        self.fault_player.event("note", f"demo started: {o.groups or o.brokers} "
                    f"{'groups' if o.groups else 'brokers'}, {o.rate:g} msgs/s"
                    + ("" if o.faults else ", no faults"))
        try:
            if o.groups:
                from broker_core.ha.routes import routes_for

                self.cluster = Cluster(0, o.base_port, data, name="demo", groups=o.groups,
                                       replicas=2, replication="sync", acl=o.acl, tls=o.tls,
                                       extra_args=self.realtime_args, grpc=o.clients,
                                       grpc_trace_rate=o.trace_rate)
                self.cluster.up()
                self._as_admin()
                self.routes = routes_for(self.cluster.file)
                for topic in (DEMO_TOPIC, *(("demo-rmq",) if o.clients and o.rocketmq else ())):
                    ensure_topic(self.routes.wait(), topic)  # (demo-rmq: rocketmq_clients)
                self._spawn(lambda: self.cluster.supervise(self._stop.is_set, restart=True),
                            "supervisor")  # (a killed broker comes back, as a slave)
            else:
                self.cluster = Cluster(o.brokers, o.base_port, data, name="demo", acl=o.acl,
                                       tls=o.tls, extra_args=self.realtime_args)
                self.cluster.up()
                self._as_admin()
                ensure_topic(self.cluster.file.addrs, DEMO_TOPIC)  # its files, before the load
            if o.clients:
                self.clients = [self._start_clients(part) for part in CLIENT_PARTS]
            self._script_start = time.monotonic()  # the clients' cycle began just before
            self._spawn(lambda: self._start_load(time.time() + LOAD_AFTER_S), "load")
            if o.faults:
                self._spawn(self.fault_player.loop, "faults")
        except BaseException:
            self.stop()
            raise
        return self

    def _as_admin(self) -> None:
        """With the ACL on: this process (console, faults) acts as admin; each client
        gets a user of its own (console.demo.users), and every process the admin
        endpoints' token. With TLS: this process and its children trust the cluster's
        CA."""
        from broker_core.acl import admin_token
        from broker_core.acl.tls import ENV_CA

        self._env_before = {k: os.environ.get(k, "") for k in ("FLOODGATE_CREDENTIALS",
                                                               ENV_CA, admin_token.ENV)}
        if self.cluster.tls_ca is not None:
            os.environ[ENV_CA] = str(self.cluster.tls_ca)
        if self.cluster.credentials is None:
            return
        from console.demo.users import make_users

        os.environ["FLOODGATE_CREDENTIALS"] = str(self.cluster.credentials)
        os.environ[admin_token.ENV] = str(self.cluster.admin_token)
        self.users = make_users(self.cluster.path, self.cluster.credentials,
                                self.cluster.data / "users")

    def _env_as(self, user: str) -> dict | None:
        """A child's environment acting as `user` (None: as this process)."""
        if not self.users:
            return None
        return {**os.environ, "FLOODGATE_CREDENTIALS": str(self.users[user])}

    @property
    def producer_addr(self) -> str:
        return f"127.0.0.1:{self.producer_port}"

    def _start_producer(self, start_at: float) -> subprocess.Popen:
        """The load: `floodgate bench produce` with the demo's settings, its /stats and
        /metrics on producer_port, sending from `start_at` (wall clock); up once it
        answers /healthz."""
        o = self.opts
        argv = [sys.executable, "-m", "console.cli", "bench", "produce", "--cluster",
                str(self.cluster.path), "--topic", DEMO_TOPIC, "--rate", f"{o.rate:g}",
                "--duration", "1e9", "--size", str(o.size), "--concurrency", "64",
                "--timeout", "3", "--send-deadline", "10", "--group", DEMO_GROUP,
                "--trace-rate", f"{o.trace_rate:g}",
                "--key-prefix", KEY_PREFIX, "--start-at", f"{start_at:.3f}", "--stamp",
                "--name", "demo", "--http-port",
                str(self.producer_port), *self.realtime_args]
        log_file = open(self.cluster.data / "producer.log", "ab")  # noqa: SIM115 - the child's
        try:
            proc = self.producer = subprocess.Popen(argv, stdout=log_file,
                                                    stderr=subprocess.STDOUT,
                                                    process_group=0,
                                                    env=self._env_as("producer"))
        finally:
            log_file.close()
        deadline = time.monotonic() + 30
        while self._producer_stats("/healthz") is None and not self._stop.is_set():
            if proc.poll() is not None or time.monotonic() > deadline:
                from console.errors import CommandFailed

                raise CommandFailed(f"the demo's producer did not start (see "
                                    f"{self.cluster.data / 'producer.log'})")
            time.sleep(0.1)
        return proc

    def _producer_stats(self, path: str = "/stats") -> dict | None:
        """The producer's /stats (None when it does not answer)."""
        import json
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://{self.producer_addr}{path}", timeout=2) as r:
                body = r.read()
        except OSError:
            return None
        return json.loads(body) if path == "/stats" else {}

    def _start_load(self, start_at: float) -> None:
        try:
            self._start_producer(start_at)
        except Exception as exc:  # noqa: BLE001 - the console shows the producer DOWN
            log.error("the demo's producer did not start: %s", exc)

    def _start_clients(self, part: str) -> subprocess.Popen:
        """Consumer groups and the throttled batch producer (console.demo.clients), in
        processes of their own: they cost the demo's producer no GIL time, and the group
        that keeps up none of the others' (`part`: console.demo.clients.PARTS)."""
        log_file = open(self.cluster.data / "clients.log", "ab")  # noqa: SIM115 - the child's
        try:
            return subprocess.Popen(
                [sys.executable, "-m", "console.demo.clients", str(self.cluster.path),
                 f"--trace-rate={self.opts.trace_rate:g}", f"--rate={self.opts.rate:g}",
                 f"--nice={REST_SCHED if self.opts.priorities and part != 'fast' else 0}",
                 *([f"--realtime={BROKER_RT_PRIORITY}"] if self.realtime and part == "fast"
                   else []),
                 f"--part={part}", *(["--rocketmq=1"] if self.opts.rocketmq else []),
                 *([f"--users={self.cluster.data / 'users'}"] if self.users else [])],
                stdout=log_file, stderr=subprocess.STDOUT, process_group=0,
                env=self._env_as("batch"))
        finally:
            log_file.close()

    def _spawn(self, fn, name: str) -> None:
        t = threading.Thread(target=fn, name=f"floodgate-demo-{name}", daemon=True)
        self._threads.append(t)
        t.start()

    @property
    def data_dir(self) -> Path:
        """Where the cluster, its logs and the demo's own log live."""
        return self.opts.data or self._made_data

    @property
    def removes_data(self) -> bool:
        """True: the data dir is temporary, removed when the demo stops."""
        return self._made_data is not None

    def console_config(self):
        from console.config import ConsoleConfig, brokers_of

        brokers, groups = brokers_of(self.cluster.file)
        return ConsoleConfig(brokers=brokers, groups=groups, producers=[self.producer_addr],
                             title="floodgate demo", cluster=self.cluster.path).validate()

    def script_elapsed(self) -> float:
        """Seconds since the scripts began (0 before they have)."""
        start = self._script_start
        return 0.0 if start is None else time.monotonic() - start

    # --- what happened ---------------------------------------------------------------
    def collect_transitions(self) -> list[dict]:
        """Every fuse transition seen so far (the fuse keeps only its last 100)."""
        stats = self._producer_stats() or {}
        for t in (stats.get("fuse") or {}).get("transitions", []):
            key = (t["time"], t["broker"], t["event"], t["reason"])
            kept = {k: t[k] for k in ("broker", "event", "reason", "detail") if k in t}
            self._transitions.setdefault(key, {"time": t["wall_time"], **kept})
        return sorted(self._transitions.values(), key=lambda t: t["time"])

    def fuse_snapshot(self) -> dict:
        return (self._producer_stats() or {}).get("fuse") or {}

    def load_totals(self) -> dict:
        """The producer's totals, the rate it was asked for and the one it achieved since
        it started (msgs answered a second) and over its last 10 s."""
        stats = self._producer_stats() or {}
        load = stats.get("load") or {}
        totals = load.get("totals") or {"acked": 0, "errors": 0, "error_reasons": {}}
        started = load.get("started") or 0.0
        took = stats.get("time", 0.0) - started
        achieved = (totals["acked"] + totals["errors"]) / took if started and took > 0 else None
        return {**totals, "target_rate": self.opts.rate, "achieved_rate": achieved,
                "recent_rate": load.get("rate"), "brokers_realtime": self.realtime,
                "session_nice": self.session_nice, "priorities": self.opts.priorities}

    # --- stop ------------------------------------------------------------------------
    def stop(self) -> None:
        self._stop.set()
        if self.events is not None and self._made_data is None:  # its events outlive it
            self.fault_player.event("note", "demo stopped")
        if self.cluster is not None:
            self.cluster.stop_supervising()
        for clients in self.clients:
            clients.terminate()  # it commits what it consumed, then exits
        for t in self._threads:
            t.join(10)
        if self.producer is not None:
            self.producer.terminate()  # it answers what is in flight, then exits
            try:
                self.producer.wait(10)
            except subprocess.TimeoutExpired:
                self.producer.kill()
            self.producer = None
        if self.routes is not None:
            self.routes.close()
        for clients in self.clients:
            clients.terminate()  # again: it may have started while the rest stopped
            try:
                clients.wait(10)
            except subprocess.TimeoutExpired:
                clients.kill()
        self.clients = []
        if self.cluster is not None:
            self.cluster.down()
        if self._session_nice_before is not None:  # the terminal outlives the demo
            from kernel_tuning.autogroup import set_session_nice

            set_session_nice(self._session_nice_before)
            self._session_nice_before = self.session_nice = None
        if self._env_before is not None:  # the process no longer acts as the demo's admin
            os.environ.update(self._env_before)
            self._env_before = None
        if self._made_data is not None:
            shutil.rmtree(self._made_data, ignore_errors=True)
            self._made_data = None
