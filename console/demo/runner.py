"""`floodgate demo`: a local cluster under load with a fault script, for the console.

Pieces, all stopped by `Demo.stop()` in reverse order:
- the cluster: `broker_core.cluster.launcher.Cluster`, one process per broker;
- a fuse-enabled producer driven by a `LoadGenerator` thread, serving its own
  /stats and /metrics (`ProducerHttp`) so the console's Fuse screen has data;
- two consumer groups (one healthy, one that slows, hangs and recovers) and a
  producer group flooding past its quota, in a process of their own
  (`console.demo.clients`), so the console shows backlog and throttling;
- the fault script (`FAULT_SCRIPT`, repeated every `CYCLE_S`), in two acts so the
  fuse's story reads plainly: first broker #2 stalls like a PageCache stall
  (seed 000's heatmap) and is isolated at once; its stalls end, and while it is
  still isolated broker #4 starts answering 20 % of sends with errors. The cap
  (1 of 6) is taken, so seed rule 4 puts broker #2, isolated earliest and
  healthy again, back in service as overflow. Then #4 clears too.
Only a data directory the demo created itself is removed at the end.

With `groups` (`make demo`: 3), the cluster is replicated: each group a master
and a slave with sync replication, a controller and an embedded ZooKeeper;
the producer sends to masters through the routes, the fuse judges groups, the
two acts fault group-2's and group-3's masters, and act 3 SIGKILLs group-1's
master: the controller promotes its slave (the console shows the failover)
and the supervisor brings the killed broker back as the new slave.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from broker_core.cluster.ports import port_free

log = logging.getLogger("floodgate.demo")

STALLS = {"stall_ms": 800.0, "stall_every_s": 3.0, "stall_random": True}
ERRORS = {"error_rate": 0.2}
# (seconds into the cycle, broker number (1-based), fault body or None to clear)
FAULT_SCRIPT: tuple[tuple[float, int, dict | None], ...] = (
    (6.0, 2, STALLS),  # act 1: isolated for slowness within a second
    (36.0, 2, None),  # its stalls end; it stays isolated for its minute
    (45.0, 4, ERRORS),  # act 2: isolated for errors; the cap sends #2 back (rule 4)
    (75.0, 4, None),
)
CYCLE_S = 150.0
DEMO_TOPIC = "demo"
DEMO_GROUP = "demo-app"  # the demo producer's group (brokers' quotas see it)
CLIENTS_AFTER_S = 4.0  # consumers and the batch producer start this long after the load
KEY_PREFIX = "order-"  # the demo's n-th message is keyed order-n (`floodgate trace --key`)
# Replicated demo: the same acts on groups 2 and 3 (their masters), then a kill.
KILL = {"kill": True}
HA_FAULT_SCRIPT: tuple[tuple[float, int, dict | None], ...] = (
    *FAULT_SCRIPT[:2],
    (45.0, 3, ERRORS),
    (75.0, 3, None),
    (95.0, 1, KILL),  # act 3: group-1's master dies; its slave takes over within seconds
)


@dataclass
class DemoOptions:
    brokers: int = 6
    rate: float = 5000.0
    faults: bool = True
    data: Path | None = None  # kept; None = a temporary directory removed at the end
    base_port: int = 20900
    size: int = 128
    groups: int = 0  # > 0: replicated groups of master + slave (sync) instead of `brokers`
    clients: bool = True  # consumer groups and a throttled producer (console.demo.clients)
    # share of the demo's sends traced (and of deliveries the consumer groups report):
    # every message, so any key order-N can be looked up in the console's trace screen
    trace_rate: float = 1.0


@dataclass
class FaultAction:
    time: float  # wall clock, taken before the broker was asked: the fault cannot start earlier
    broker: str
    action: str
    kind: str = ""  # stall | errors | clear


def fault_kind(body: dict | None) -> str:
    if body is None:
        return "clear"
    if body.get("kill"):
        return "kill"
    return "stall" if body.get("stall_ms") else "errors" if body.get("error_rate") else "other"




def script_targets(n: int) -> dict[int, int]:
    """Broker number in the script -> broker number in a cluster of n (small clusters fold)."""
    return {k: min(k, n) for k in (2, 4)} if n >= 4 else {2: min(2, n), 4: n}


@dataclass
class Demo:
    opts: DemoOptions
    actions: list[FaultAction] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._made_data: Path | None = None
        self.cluster = self.producer = self.gen = self.http = self.clients = None
        self._threads: list[threading.Thread] = []
        self._transitions: dict[tuple, dict] = {}
        self.routes = None  # replicated demo: who is master of each group

    @property
    def producer_port(self) -> int:
        if self.opts.groups:  # 3 ports per broker, then the embedded ZooKeeper
            return self.opts.base_port + 3 * 2 * self.opts.groups + 1
        return self.opts.base_port + 2 * self.opts.brokers

    # --- start ---------------------------------------------------------------------
    def start(self) -> Demo:
        from broker_core.client.admin import ensure_topic
        from broker_core.client.loadgen import LoadGenerator, LoadSpec
        from broker_core.client.producer import Producer
        from broker_core.client.producer_http import ProducerHttp
        from broker_core.cluster.launcher import Cluster

        o = self.opts
        busy = [p for p in range(o.base_port, self.producer_port + 1) if not port_free(p)]
        if busy:
            from console.errors import CommandFailed

            raise CommandFailed(f"port(s) {', '.join(map(str, busy[:5]))} in use: "
                                f"pick another --base-port")
        data = o.data
        if data is None:
            data = self._made_data = Path(tempfile.mkdtemp(prefix="floodgate-demo-"))
        try:
            if o.groups:
                from broker_core.ha.routes import routes_for

                self.cluster = Cluster(0, o.base_port, data, name="demo", groups=o.groups,
                                       replicas=2, replication="sync")
                self.cluster.up()
                self.routes = routes_for(self.cluster.file)
                ensure_topic(self.routes.wait(), DEMO_TOPIC)
                self.producer = Producer(routes=self.routes, timeout=3.0, group=DEMO_GROUP,
                                         trace_rate=o.trace_rate)
                # a killed broker comes back, and rejoins its group as slave
                self._spawn(lambda: self.cluster.supervise(self._stop.is_set, restart=True),
                            "supervisor")
            else:
                self.cluster = Cluster(o.brokers, o.base_port, data, name="demo")
                self.cluster.up()
                ensure_topic(self.cluster.file.addrs, DEMO_TOPIC)  # its files, before the load
                self.producer = Producer(self.cluster.file.addrs, timeout=3.0,
                                         group=DEMO_GROUP, trace_rate=o.trace_rate)
            self.gen = LoadGenerator(self.producer, LoadSpec(
                topic=DEMO_TOPIC, size=o.size, duration=10 ** 9, rate=o.rate, concurrency=64,
                key_prefix=KEY_PREFIX))
            self.http = ProducerHttp(self.producer.fuse, "demo", self.producer_port,
                                     counters=self.producer.counters,
                                     extra_stats=lambda: {"load": self.gen.recent_summary()})
            self.http.start()
            self._spawn(self.gen.run, "load")
            if o.clients:  # once the slaves are in sync: a cold start is busy enough
                self._spawn(self._clients_later, "clients")
            if o.faults:
                self._spawn(self._fault_loop, "faults")
        except BaseException:
            self.stop()
            raise
        return self

    def _clients_later(self) -> None:
        if not self._stop.wait(CLIENTS_AFTER_S):
            self.clients = self._start_clients()

    def _start_clients(self) -> subprocess.Popen:
        """Consumer groups and the throttled batch producer (console.demo.clients), in
        their own process: they cost the demo's producer no GIL time."""
        log_file = open(self.cluster.data / "clients.log", "ab")  # noqa: SIM115 - the child's
        try:
            return subprocess.Popen(
                [sys.executable, "-m", "console.demo.clients", str(self.cluster.path),
                 f"--trace-rate={self.opts.trace_rate:g}"],
                stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log_file.close()

    def _spawn(self, fn, name: str) -> None:
        t = threading.Thread(target=fn, name=f"floodgate-demo-{name}", daemon=True)
        self._threads.append(t)
        t.start()

    @property
    def data_dir(self) -> Path | None:
        return self.cluster.data if self.cluster else None

    def console_config(self):
        from console.config import ConsoleConfig

        brokers = [(b.name, b.http) for b in self.cluster.file.brokers]
        return ConsoleConfig(brokers=brokers, producers=[self.http.addr],
                             title="floodgate demo", cluster=self.cluster.path).validate()

    # --- faults --------------------------------------------------------------------
    def _target(self, number: int) -> tuple[str, object]:
        """(the name the fuse knows, the broker entry) of a script's target: broker
        number N, or in a replicated demo group-N (its master now)."""
        if not self.opts.groups:
            entry = self.cluster.file.brokers[number - 1]
            return entry.name, entry
        group = f"group-{min(number, self.opts.groups)}"
        record = self.routes.records.get(group)
        return group, self.cluster.file.broker(record.master) if record else \
            self.cluster.file.groups[group][0]

    def _fault(self, number: int, body: dict | None) -> None:
        from broker_core.client.admin import fault

        name, entry = self._target(number)
        text = "clear" if body is None else ", ".join(f"{k}={v}" for k, v in body.items())
        asked = time.time()
        try:
            if body is not None and body.get("kill"):
                text = self._kill(entry)
            else:
                fault(entry.http, "DELETE" if body is None else "POST", body)
                if self.opts.groups:
                    text += f" on master {entry.name}"
        except Exception as exc:  # noqa: BLE001 - a dead broker must not end the demo
            text += f" (failed: {exc})"
        self.actions.append(FaultAction(asked, name, text, fault_kind(body)))
        log.info("fault broker=%s %s", name, text)

    def _kill(self, entry) -> str:
        proc = self.cluster.procs.get(entry.name)
        if proc is None or proc.poll() is not None:
            return f"master {entry.name} already down"
        proc.kill()
        return (f"SIGKILL master {entry.name} (pid {proc.pid}): its slave takes over, "
                "the supervisor brings it back as slave")

    def _fault_loop(self) -> None:
        targets = script_targets(self.opts.brokers)
        script = HA_FAULT_SCRIPT if self.opts.groups else FAULT_SCRIPT
        if self.opts.groups:
            targets = {n: n for _at, n, _b in script}
        start = time.monotonic()
        cycle = 0
        while not self._stop.is_set():
            for at, number, body in script:
                due = start + cycle * CYCLE_S + at
                if self._stop.wait(max(0.0, due - time.monotonic())):
                    return
                self._fault(targets[number], body)
            cycle += 1

    # --- what happened ---------------------------------------------------------------
    def collect_transitions(self) -> list[dict]:
        """Every fuse transition seen so far (the fuse keeps only its last 100)."""
        from broker_core.client.producer_http import fuse_stats

        if self.producer is not None and self.producer.fuse is not None:
            for t in fuse_stats(self.producer.fuse).get("transitions", []):
                key = (t["time"], t["broker"], t["event"], t["reason"])
                self._transitions.setdefault(key, {"time": t["wall_time"], "broker": t["broker"],
                                                   "event": t["event"], "reason": t["reason"]})
        return sorted(self._transitions.values(), key=lambda t: t["time"])

    def fuse_snapshot(self) -> dict:
        from broker_core.client.producer_http import fuse_stats

        if self.producer is None or self.producer.fuse is None:
            return {}
        return fuse_stats(self.producer.fuse)

    def load_totals(self) -> dict:
        if self.gen is None:
            return {"acked": 0, "errors": 0}
        with self.gen.lock:
            return {"acked": self.gen.result.acked, "errors": self.gen.result.errors,
                    "error_reasons": dict(self.gen.result.error_reasons)}

    # --- stop ------------------------------------------------------------------------
    def stop(self) -> None:
        self._stop.set()
        if self.clients is not None:
            self.clients.terminate()  # it commits what it consumed, then exits
        if self.gen is not None:
            self.gen.stop()
        for t in self._threads:
            t.join(10)
        if self.producer is not None:
            self.producer.close()
        if self.http is not None:
            self.http.close()
        if self.routes is not None:
            self.routes.close()
        if self.clients is not None:
            self.clients.terminate()  # again: it may have started while the rest stopped
            try:
                self.clients.wait(10)
            except subprocess.TimeoutExpired:
                self.clients.kill()
            self.clients = None
        if self.cluster is not None:
            self.cluster.down()
        if self._made_data is not None:
            shutil.rmtree(self._made_data, ignore_errors=True)
            self._made_data = None
