"""`floodgate drill failover`: prove a group's failover loses nothing acknowledged.

Produces at a steady rate to every group of a replicated cluster (through
the routes, so to masters only), SIGKILLs one group's master mid-run, keeps
producing, then reads the topic back from every group and compares:

- `acked`: sends the producer was told are stored (SEND_OK, and the stored
  but short-of-a-promise answers; `acked_by_status` splits them);
- `lost`: acknowledged but never read back (the drill fails if any);
- `duplicates`: read back more than once (a retry after a lost answer);
- `send_errors`: sends that failed after the producer's retries;
- `failover_s`: from the kill to the first acknowledged send to the group
  that began after the kill (so answered by its new master).

The drill runs on the cluster's host: it kills the master by the pid the
broker reports over HA_STATE.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field

from broker_core.client.aio_producer import AsyncProducer
from broker_core.client.attempts import SendFailed
from broker_core.cluster.cluster_file import ClusterFile
from broker_core.cluster.readback import read_topic
from broker_core.cluster.roles import asker, broker_role, wait_masters
from broker_core.errors import BrokerError
from broker_core.ha.routes import routes_for

log = logging.getLogger("floodgate.drill")


@dataclass(frozen=True)
class DrillSpec:
    group: str | None = None
    rate: float = 2000.0
    duration: float = 30.0
    kill_after: float = 10.0
    size: int = 128
    topic: str = "drill"
    concurrency: int = 512
    timeout: float = 3.0  # per send attempt
    ready_timeout: float = 30.0
    # each send's retry budget: one in flight to the killed master waits for its group's
    # new master (idempotent: stored once), not 1 + 2 attempts within a second
    send_deadline: float = 15.0


@dataclass
class DrillResult:
    group: str
    old_master: str
    new_master: str = ""
    epoch_before: int = 0
    epoch_after: int = 0
    sent: int = 0
    acked: int = 0
    acked_by_status: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    duplicates: int = 0
    read_back: int = 0
    send_errors: int = 0
    error_reasons: dict[str, int] = field(default_factory=dict)
    failover_s: float | None = None
    detect_s: float | None = None  # kill -> the record names a new master
    seconds: float = 0.0
    rate: float = 0.0
    lost_sample: list[int] = field(default_factory=list)
    consensus: str = "controller"  # how the group elects: "controller" (ZooKeeper) or "raft"

    @property
    def ok(self) -> bool:
        return self.lost == 0

    def to_dict(self) -> dict:
        return asdict(self)


def _ready(spec: ClusterFile, group: str, timeout: float) -> tuple[dict, dict]:
    """Wait until the group's master (a raft group's leader) has every other replica in
    sync; (its record, its HA_STATE)."""
    try:
        rec = wait_masters(spec, timeout, in_sync=True)[group]
    except BrokerError as exc:
        raise BrokerError(f"{exc}: a failover now could lose acknowledged messages") from None
    return asdict(rec), broker_role(rec.master_addr, **asker(spec))


def run_drill(spec: ClusterFile, drill: DrillSpec) -> DrillResult:
    if not spec.replicated:
        raise BrokerError(f"cluster {spec.name} is not replicated (no zk in its cluster file): "
                          "start it with `floodgate cluster up --groups G --replicas R`")
    group = drill.group or sorted(spec.groups)[0]
    if group not in spec.groups:
        raise BrokerError(f"no group {group!r} in cluster {spec.name} "
                          f"(groups: {', '.join(sorted(spec.groups))})")
    record, state = _ready(spec, group, drill.ready_timeout)
    result = DrillResult(group, record["master"], epoch_before=record["epoch"],
                         consensus="raft" if spec.raft else "controller")
    routes = routes_for(spec)
    try:
        routes.wait(drill.ready_timeout)
        run_id, acked = asyncio.run(_produce(routes, drill, result, int(state["pid"])))
        rec = routes.records[group]
        result.new_master, result.epoch_after = rec.master, rec.epoch
        _check(routes, drill, result, run_id, acked)
    finally:
        routes.close()
    return result


async def _produce(routes, drill: DrillSpec, result: DrillResult,
                   pid: int) -> tuple[str, dict[int, str]]:
    """Fill in the send figures; returns the run's id and every acked seq -> status."""
    loop = asyncio.get_running_loop()
    group = result.group
    run_id = uuid.uuid4().hex[:8]
    pad = b"." * max(0, drill.size - 24)
    sem = asyncio.Semaphore(drill.concurrency)
    acked: dict[int, str] = {}
    statuses: Counter = Counter()
    reasons: Counter = Counter()
    kill_at: list[float] = []
    firsts: list[float] = []
    version0 = routes.version

    async def one(seq: int, producer: AsyncProducer) -> None:
        async with sem:
            began = loop.time()
            try:
                res = await producer.send(drill.topic, f"{run_id}:{seq}:".encode() + pad)
            except SendFailed as exc:
                reasons[str(exc).split(";")[-1].strip()[:120]] += 1
                return
            acked[seq] = res.status
            statuses[res.status] += 1
            if kill_at and res.broker == group and began >= kill_at[0] and not firsts:
                firsts.append(loop.time() - kill_at[0])

    async def watch_routes() -> None:
        while not kill_at:
            await asyncio.sleep(0.01)
        changed = await loop.run_in_executor(None, routes.wait_change, version0, 60.0)
        if changed:
            result.detect_s = loop.time() - kill_at[0]

    async with AsyncProducer(routes=routes, timeout=drill.timeout,
                             deadline_s=drill.send_deadline) as producer:
        watcher = asyncio.ensure_future(watch_routes())
        tasks = []
        start = loop.time()
        seq = 0
        total = int(drill.duration * drill.rate)
        while (now := loop.time()) < start + drill.duration:
            due = min(int((now - start) * drill.rate) + 1, total)
            while seq < due:
                tasks.append(asyncio.ensure_future(one(seq, producer)))
                seq += 1
            if not kill_at and now - start >= drill.kill_after:
                os.kill(pid, signal.SIGKILL)
                kill_at.append(loop.time())
                log.warning("killed master %s (pid %d) of %s", result.old_master, pid, group)
            await asyncio.sleep(0.002)
        while seq < total:  # the loop woke past the end before the last one was due
            tasks.append(asyncio.ensure_future(one(seq, producer)))
            seq += 1
        await asyncio.gather(*tasks)
        result.seconds = loop.time() - start
        watcher.cancel()
    result.sent = seq
    result.acked = len(acked)
    result.acked_by_status = dict(statuses)
    result.send_errors = sum(reasons.values())
    result.error_reasons = dict(reasons.most_common(5))
    result.failover_s = firsts[0] if firsts else None
    result.rate = result.acked / result.seconds if result.seconds else 0.0
    return run_id, acked


def _check(routes, drill: DrillSpec, result: DrillResult, run_id: str,
           acked: dict[int, str]) -> None:
    prefix = f"{run_id}:".encode()

    def key(body: bytes) -> str | None:
        if not body.startswith(prefix):
            return None
        return body.split(b":", 2)[1].decode()

    addrs = [routes.replicas(g)[0] for g in routes.groups if routes.replicas(g)]
    seen = read_topic(addrs, drill.topic, key)
    lost = sorted(s for s in acked if seen.get(str(s), 0) == 0)
    result.lost = len(lost)
    result.lost_sample = lost[:20]
    result.duplicates = sum(n - 1 for n in seen.values() if n > 1)
    result.read_back = sum(seen.values())
