"""`floodgate drill chaos`: faults at random under load, then count what was lost.

openchaos's shape: a keyed producer (through the routes, sync replication) and a
consumer group run throughout; a nemesis applies a random fault every few seconds
and heals it; at the end every fault is healed, every group has a master with a
slave in sync, the topic is read back from each group, and the history (JSON
lines, written as it happens, so a failed run can be read afterwards) goes
through cluster.chaos_checker.

Faults: partition (a master cut off from ZooKeeper, the controller and its slave
but not from the producers; or the hosts split in two at random), isolate (a
node from everything), loss (5 % of a master's packets), delay (30 ms each way
to a master), kill (SIGKILL of a master: the cluster must be up with
`--restart`), pause (SIGSTOP of a master for the fault's length). The network
kinds need a cluster on namespaced hosts (`cluster up --netns`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import re
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from broker_core.client.aio_producer import AsyncProducer
from broker_core.client.attempts import SendFailed
from broker_core.client.consumer import Consumer
from broker_core.cluster import netfault
from broker_core.cluster.chaos_checker import ChaosReport, check, load_history
from broker_core.cluster.chaos_pipeline import Pipeline
from broker_core.cluster.chaos_register import Register
from broker_core.cluster.cluster_file import ClusterFile
from broker_core.cluster.netns import CLIENTS
from broker_core.cluster.readback import read_queue_bodies
from broker_core.cluster.roles import broker_role, wait_masters
from broker_core.errors import BrokerError
from broker_core.ha.routes import routes_for
from broker_core.message_id import decode_id

log = logging.getLogger("floodgate.chaos")

NET_KINDS = ("partition", "isolate", "loss", "delay")
PROCESS_KINDS = ("kill", "pause")
KINDS = NET_KINDS + PROCESS_KINDS
_LAST_FROM = re.compile(r"last from ([^:\s]+):")  # SendFailed's text names its last group
LOSS_PCT = 5.0
DELAY_MS = 30.0


@dataclass(frozen=True)
class ChaosSpec:
    duration: float = 60.0
    faults: tuple[str, ...] = KINDS
    seed: int = 1
    rate: float = 200.0
    keys: int = 16
    topic: str = "chaos"
    group: str = "chaos-check"  # the consumer group
    fault_s: tuple[float, float] = (3.0, 6.0)  # how long a fault lasts
    gap_s: tuple[float, float] = (2.0, 4.0)  # healthy between faults
    settle_timeout: float = 60.0
    history: Path | None = None
    send_deadline: float = 15.0  # each send's retry budget (client.attempts.SendOptions)
    pipeline: bool = True  # the topic transformed exactly once too (cluster.chaos_pipeline)
    register: bool = True  # compare-and-sets checked for linearizability (chaos_register)


def check_spec(spec: ClusterFile, chaos: ChaosSpec) -> None:
    """BrokerError, one line, for a run that cannot be made on this cluster."""
    if not spec.replicated:
        raise BrokerError(f"cluster {spec.name} is not replicated: start it with "
                          "`floodgate cluster up --groups G --netns`")
    unknown = [k for k in chaos.faults if k not in KINDS]
    if unknown or not chaos.faults:
        raise BrokerError(f"unknown fault kind(s) {', '.join(unknown) or '(none)'}: "
                          f"choose from {', '.join(KINDS)}")
    net = [k for k in chaos.faults if k in NET_KINDS]
    if net and spec.layout is None:
        raise BrokerError(f"{', '.join(net)} need hosts of their own: start the cluster "
                          "with `floodgate cluster up --netns`")
    if "kill" in chaos.faults and not spec.restart:
        raise BrokerError("kill needs a cluster that restarts its brokers: "
                          "`floodgate cluster up --restart`")


class History:
    """The run's events, appended as JSON lines (flushed each second)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._f = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self._lock = threading.Lock()
        self.t0 = time.monotonic()

    def add(self, kind: str, at: float | None = None, **fields) -> None:
        """`at`: when it happened (time.monotonic()), if not now."""
        t = (time.monotonic() if at is None else at) - self.t0
        line = json.dumps({"t": round(t, 4), "type": kind, **fields})
        with self._lock:
            self._f.write(line + "\n")

    def flush(self) -> None:
        with self._lock:
            self._f.flush()

    def close(self) -> None:
        with self._lock:
            self._f.close()


@dataclass
class _Run:
    spec: ClusterFile
    chaos: ChaosSpec
    state_dir: Path
    history: History
    routes: object
    rng: random.Random
    stop: threading.Event = field(default_factory=threading.Event)
    paused: set[int] = field(default_factory=set)
    names_by_addr: dict[str, str] = field(default_factory=dict)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])  # in every body
    fuse: object = None  # the producer's, once it runs


def run_chaos(spec: ClusterFile, chaos: ChaosSpec, state_dir: Path) -> ChaosReport:
    check_spec(spec, chaos)
    wait_masters(spec, chaos.settle_timeout)
    history_path = chaos.history or state_dir / f"chaos-{int(time.time())}.jsonl"
    routes = routes_for(spec)
    run = _Run(spec, chaos, state_dir, History(history_path), routes, random.Random(chaos.seed),
               names_by_addr={b.addr: b.name for b in spec.brokers})
    threads = [threading.Thread(target=f, args=(run,), name=f.__name__, daemon=True)
               for f in (_watch_masters, _watch_fuse, _nemesis, _consume)]
    pipeline = Pipeline(run) if chaos.pipeline else None
    register = Register(run) if chaos.register else None
    try:
        routes.wait(chaos.settle_timeout)
        for t in threads:
            t.start()
        for extra in (pipeline, register):
            if extra is not None:
                extra.start()
        asyncio.run(_produce(run))
    finally:
        run.stop.set()
        if register is not None:
            register.stop()
        for t in threads:
            t.join(30)
        _heal_all(run)
    wait_masters(spec, chaos.settle_timeout)  # every group back, a slave in sync
    try:
        if pipeline is not None:
            run.history.add("pipeline", drained=pipeline.drain())
        _read_back(run)
        for extra in (pipeline, register):
            if extra is not None:
                extra.read_back()
    finally:
        routes.close()
        run.history.close()
    report = check(load_history(history_path))
    report_path = history_path.with_suffix(".report.json")
    report_path.write_text(json.dumps(report.to_dict(), indent=1), encoding="utf-8")
    return report


# -- the workload ---------------------------------------------------------------------------
async def _produce(run: _Run) -> None:
    chaos, h = run.chaos, run.history
    loop = asyncio.get_running_loop()
    run_id = run.run_id
    inflight: set[asyncio.Future] = set()

    async def one(seq: int, producer: AsyncProducer) -> None:
        key = f"k{seq % chaos.keys}"
        h.add("send", key=key, seq=seq, ordered=False)
        try:
            res = await producer.send(chaos.topic, f"{run_id}:{key}:{seq}".encode(), keys=key)
        except SendFailed as exc:
            last = _LAST_FROM.search(str(exc))
            h.add("fail", key=key, seq=seq, group=last.group(1) if last else "",
                  reason=str(exc)[-160:])
            return
        master = res.broker
        if res.msg_id:
            with contextlib.suppress(BrokerError):
                master = run.names_by_addr.get(decode_id(res.msg_id)[0], master)
        h.add("ack", key=key, seq=seq, group=res.broker, master=master, status=res.status,
              queue=res.queue_id, offset=res.queue_offset)

    async with AsyncProducer(routes=run.routes, timeout=1.0,
                             deadline_s=run.chaos.send_deadline) as producer:
        run.fuse = producer.fuse
        start = loop.time()
        seq, last_flush = 0, start
        while (now := loop.time()) < start + chaos.duration:
            while seq < int((now - start) * chaos.rate) + 1:
                fut = asyncio.ensure_future(one(seq, producer))
                inflight.add(fut)
                fut.add_done_callback(inflight.discard)
                seq += 1
            if now - last_flush >= 1.0:
                h.flush()
                last_flush = now
            await asyncio.sleep(0.005)
        if inflight:
            await asyncio.wait(inflight, timeout=30)


def _consume(run: _Run) -> None:
    prefix = f"{run.run_id}:".encode()
    with Consumer(run.chaos.group, run.chaos.topic, routes=run.routes,
                  client_id="chaos-checker") as c:
        while not run.stop.is_set():
            try:
                got = c.poll(max_msgs=256, timeout=0.5)
            except BrokerError as exc:
                log.info("consumer: %s", exc)
                time.sleep(0.2)
                continue
            for m in got:
                if m.body.startswith(prefix):
                    _rid, key, seq = m.body.decode().split(":")
                    run.history.add("deliver", key=key, seq=int(seq))
            if got:
                with contextlib.suppress(BrokerError):
                    c.commit()


def _watch_masters(run: _Run) -> None:
    seen: dict[str, tuple[str, int]] = {}
    while not run.stop.is_set():
        for group, rec in list(run.routes.records.items()):
            now = (rec.master, rec.epoch)
            if rec.master and seen.get(group) != now:
                seen[group] = now
                run.history.add("master", group=group, master=rec.master, epoch=rec.epoch,
                                reason=rec.reason)
        time.sleep(0.05)


def _watch_fuse(run: _Run) -> None:
    """The producer's fuse isolating and releasing groups, as it happens."""
    isolated: dict[str, str] = {}
    while not run.stop.is_set():
        fuse = run.fuse
        if fuse is not None:
            now = {b.broker: b.reason for b in fuse.snapshot(transitions=False).isolated}
            for name in now.keys() - isolated.keys():
                run.history.add("fuse", action="isolate", group=name, reason=now[name])
            for name in isolated.keys() - now.keys():
                run.history.add("fuse", action="release", group=name)
            isolated = now
        time.sleep(0.1)


# -- the nemesis ------------------------------------------------------------------------------
def _nemesis(run: _Run) -> None:
    chaos, rng = run.chaos, run.rng
    run.stop.wait(rng.uniform(*chaos.gap_s))
    while not run.stop.is_set():
        kind = rng.choice(chaos.faults)
        began = time.monotonic()  # applying takes a few hundred ms: it acts from the first
        try:
            fault = _apply(run, kind)
        except BrokerError as exc:
            log.warning("nemesis: %s not applied: %s", kind, exc)
            run.stop.wait(1.0)
            continue
        run.history.add("nemesis", at=began, action="start", fault=fault)
        run.stop.wait(rng.uniform(*chaos.fault_s))
        _heal(run, fault)
        run.history.add("nemesis", action="stop", fault=fault)
        run.stop.wait(rng.uniform(*chaos.gap_s))


def _master_of(run: _Run, group: str) -> str:
    rec = run.routes.records.get(group)
    if rec is None or not rec.master:
        raise BrokerError(f"{group} has no master now")
    return rec.master


def _apply(run: _Run, kind: str) -> dict:
    spec, rng, layout = run.spec, run.rng, run.spec.layout
    group = rng.choice(sorted(spec.groups))
    master = _master_of(run, group)
    if kind == "partition":
        others = [n for n in layout.hosts if n != master]
        if rng.random() < 0.5:  # the master keeps its producers, loses everyone else
            side_a, side_b = [master, CLIENTS], others
        else:
            nodes = sorted(layout.hosts)
            rng.shuffle(nodes)
            cut = rng.randint(1, len(nodes) - 1)
            side_a, side_b = nodes[:cut], nodes[cut:]
            (side_a if "zookeeper" in side_a else side_b).append(CLIENTS)
        netfault.partition(layout, run.state_dir, side_a, side_b)
        away = side_b if CLIENTS in side_a else side_a  # the side the producers lose
        return {"kind": kind, "a": side_a, "b": side_b,
                "groups": sorted({_group_of(spec, n) for n in away} - {""})}
    if kind == "isolate":
        node = master if rng.random() < 0.8 else rng.choice(sorted(layout.hosts))
        netfault.isolate(layout, run.state_dir, node)
        return {"kind": kind, "node": node, "groups": [g for g in [_group_of(spec, node)] if g]}
    if kind == "loss":
        netfault.loss(layout, run.state_dir, master, LOSS_PCT)
        return {"kind": kind, "node": master, "pct": LOSS_PCT, "groups": [group]}
    if kind == "delay":
        entry = spec.broker(master)
        ports = [int(a.rsplit(":", 1)[1]) for a in (entry.addr, entry.http, entry.ha) if a]
        netfault.delay(layout, run.state_dir, master, DELAY_MS, ports)
        return {"kind": kind, "node": master, "ms": DELAY_MS, "groups": [group]}
    pid = int(broker_role(spec.broker(master).addr).get("pid") or 0)
    if not pid:
        raise BrokerError(f"{master} does not say its pid")
    os.kill(pid, signal.SIGKILL if kind == "kill" else signal.SIGSTOP)
    if kind == "pause":
        run.paused.add(pid)
    return {"kind": kind, "node": master, "pid": pid, "groups": [group]}


def _group_of(spec: ClusterFile, node: str) -> str:
    """A broker's group ("" for ZooKeeper, a controller or the clients)."""
    return next((b.group for b in spec.brokers if b.name == node), "")


def _heal(run: _Run, fault: dict) -> None:
    if fault["kind"] == "pause":
        with contextlib.suppress(ProcessLookupError):
            os.kill(fault["pid"], signal.SIGCONT)
        run.paused.discard(fault["pid"])
    elif fault["kind"] in NET_KINDS:
        netfault.heal(run.spec.layout, run.state_dir)


def _heal_all(run: _Run) -> None:
    for pid in list(run.paused):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    run.paused.clear()
    if run.spec.layout is not None:
        netfault.heal(run.spec.layout, run.state_dir)


# -- the read-back ----------------------------------------------------------------------------
def _read_back(run: _Run) -> None:
    from broker_core.client.connection import Connection
    from broker_core.protocol import Code, Op, decode_json, encode_json

    prefix = f"{run.run_id}:".encode()
    for group in sorted(run.spec.groups):
        addr = run.routes.replicas(group)[0]
        conn = Connection(addr)
        try:
            code, body = conn.call(Op.ROUTE, encode_json({"topic": run.chaos.topic,
                                                          "create": False}), 5.0)
            if code == Code.TOPIC_NOT_EXIST:
                continue
            if code != Code.OK:
                raise BrokerError(f"{addr}: ROUTE answered {Code(code).name}")
            for qid in range(int(decode_json(body)["queues"])):
                for offset, raw in enumerate(read_queue_bodies(conn, run.chaos.topic, qid)):
                    if raw.startswith(prefix):
                        _rid, key, seq = raw.decode().split(":")
                        run.history.add("read", key=key, seq=int(seq), group=group,
                                        queue=qid, offset=offset)
        finally:
            conn.close()
    run.history.flush()
