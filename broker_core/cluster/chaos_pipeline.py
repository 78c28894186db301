"""The chaos drill's exactly-once pipeline: the drill's topic is transformed into
`<topic>-out` (client.transform) under the same faults, by two members of one group,
and the checker (cluster.chaos_checker) finds what was lost, duplicated, read from an
aborted transaction, or put out of its input's order.

History events: `xform` (a commit tried: its queue, input range, halves' message ids
and outcome) and, after the run, `out` (each output read back: the input it was made
of, its half's id, where it is).
"""

from __future__ import annotations

import logging
import threading
import time

from broker_core.client.connection import Connection
from broker_core.client.transform import Transform
from broker_core.cluster.readback import read_queue
from broker_core.errors import BrokerError
from broker_core.protocol import Code, Op, decode_json, encode_json
from broker_core.protocol.system_topics import PROP_COPY_OF
from broker_core.protocol.transactions import PROP_CONSUMED_FROM

log = logging.getLogger("floodgate.chaos")

GROUP = "chaos-transform"
MEMBERS = 2
DRAIN_S = 120.0  # after the faults, for the transforms to catch up (a lock's lease and more)


def sink_of(topic: str) -> str:
    return f"{topic}-out"


class Pipeline:
    """`run`: the drill's run (cluster.chaos._Run): its routes, history and topic."""

    def __init__(self, run) -> None:
        self.run = run
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=self._member, args=(i,), daemon=True,
                                         name=f"chaos-transform-{i}") for i in range(MEMBERS)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _member(self, i: int) -> None:
        run = self.run
        topic = run.chaos.topic
        h = run.history
        with Transform(GROUP, topic, sink_of(topic), lambda m: m.body, routes=run.routes,
                       client_id=f"chaos-transform-{i}", timeout=1.0,
                       observe=lambda a: h.add("xform", member=i, **a)) as t:
            while not self.stopped.is_set():
                try:
                    t.step(0.2)
                except (BrokerError, TimeoutError) as exc:  # a group down: the drill goes on
                    log.info("transform %d: %s", i, exc)
                    self.stopped.wait(0.2)

    def drain(self, timeout: float = DRAIN_S) -> bool:
        """Once the faults are healed: wait until the group's offsets reach the end of
        every input queue, then stop the members. False when they did not in time."""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if self._behind() == 0:
                    return True
                time.sleep(0.5)
            return False
        finally:
            self.stopped.set()
            for t in self.threads:
                t.join(30)

    def _behind(self) -> int | None:
        """Input messages not yet transformed, all groups (None: a group did not answer)."""
        run, behind = self.run, 0
        for group in sorted(run.spec.groups):
            conn = Connection(run.routes.replicas(group)[0])
            try:
                for qid in range(self._queues(conn, run.chaos.topic)):
                    answer = decode_json(conn.call(Op.QUERY_OFFSET, encode_json({
                        "group": GROUP, "topic": run.chaos.topic, "queue_id": qid}), 5.0)[1])
                    behind += answer["max_offset"] - max(answer["offset"], answer["min_offset"])
            except (BrokerError, OSError, KeyError, TimeoutError):
                return None
            finally:
                conn.close()
        return behind

    @staticmethod
    def _queues(conn: Connection, topic: str) -> int:
        code, body = conn.call(Op.ROUTE, encode_json({"topic": topic, "create": False}), 5.0)
        if code == Code.TOPIC_NOT_EXIST:
            return 0
        if code != Code.OK:
            raise BrokerError(f"{conn.addr}: ROUTE answered {Code(code).name}")
        return int(decode_json(body)["queues"])

    def read_back(self) -> None:
        """Every output message, as `out` events."""
        run = self.run
        prefix = f"{run.run_id}:".encode()
        sink = sink_of(run.chaos.topic)
        for group in sorted(run.spec.groups):
            conn = Connection(run.routes.replicas(group)[0])
            try:
                for qid in range(self._queues(conn, sink)):
                    for offset, m in enumerate(read_queue(conn, sink, qid)):
                        if not m.body.startswith(prefix):
                            continue
                        _rid, key, seq = m.body.decode().split(":")
                        props = m.properties or {}
                        run.history.add("out", key=key, seq=int(seq), group=group, queue=qid,
                                        offset=offset, made_from=props.get(PROP_CONSUMED_FROM),
                                        half=props.get(PROP_COPY_OF))
            finally:
                conn.close()
        run.history.flush()
