"""The chaos drill's register: clients racing compare-and-sets on one queue's end, under
the same faults, for the linearizability check (cluster.register_checker).

The register is queue 0 of `<topic>-register` on the first group. Its state is how
many messages the queue holds; each client sends a conditional message
(protocol.conditional) expecting the end it last saw. Stored, the message took that
offset (the end moved by one); refused CONFLICT, the answer says where the end was
(a read); neither (the deadline passed), its outcome is unknown. A leader that
acknowledged what its group did not keep, a stale leader serving a CONFLICT, a retry
stored twice: each shows as a history no order of the operations can explain.

History events: `reg` (an operation invoked: client, op, expect, value), `reg-ok`
(offset), `reg-conflict` (end: where the queue was), `reg-unknown` (why) and, after the
run, `reg-read` (each offset's value, read back).
"""

from __future__ import annotations

import logging
import threading

from broker_core.client.attempts import SendFailed
from broker_core.client.connection import Connection
from broker_core.client.producer import Producer
from broker_core.cluster.readback import read_queue
from broker_core.errors import BrokerError
from broker_core.protocol import Code, OutMessage
from broker_core.protocol.conditional import PROP_EXPECT_OFFSET, conflict_at

log = logging.getLogger("floodgate.chaos")

CLIENTS = 3
PAUSE_S = 0.02  # between one client's operations: ~150 a second from three


def register_of(topic: str) -> str:
    return f"{topic}-register"


class Register:
    """`run`: the drill's run (cluster.chaos._Run)."""

    def __init__(self, run, clients: int = CLIENTS) -> None:
        self.run = run
        self.topic = register_of(run.chaos.topic)
        self.group = sorted(run.spec.groups)[0]
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=self._client, args=(i,), daemon=True,
                                         name=f"chaos-register-{i}") for i in range(clients)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.stopped.set()
        for t in self.threads:
            t.join(30)

    def _client(self, i: int) -> None:
        run, h = self.run, self.run.history
        known, n = 0, 0
        with Producer(routes=run.routes, fuse=False, timeout=1.0,
                      deadline_s=run.chaos.send_deadline) as producer:
            while not self.stopped.is_set():
                op, value = f"{i}.{n}", f"{run.run_id}:r{i}:{n}"
                n += 1
                h.add("reg", client=i, op=op, expect=known, value=value)
                message = OutMessage(value.encode(), properties={
                    PROP_EXPECT_OFFSET: str(known)})
                try:
                    res = producer.send_to(self.group, self.topic, 0, message).result()
                except SendFailed as exc:
                    at = conflict_at(str(exc)) if exc.code == Code.CONFLICT else None
                    if at is not None:
                        h.add("reg-conflict", op=op, end=at)  # (`at` is the time)
                        known = at
                    else:
                        h.add("reg-unknown", op=op, why=str(exc)[-160:])
                else:
                    h.add("reg-ok", op=op, offset=res.queue_offset)
                    known = res.queue_offset + 1
                self.stopped.wait(PAUSE_S)

    def read_back(self) -> None:
        """The register's queue as its group holds it now: `reg-read` per offset."""
        run = self.run
        conn = Connection(run.routes.replicas(self.group)[0])
        try:
            for m in read_queue(conn, self.topic, 0):
                run.history.add("reg-read", offset=m.queue_offset, value=m.body.decode())
        except BrokerError as exc:  # a register never written (the group was down): none
            log.warning("register read-back: %s", exc)
        finally:
            conn.close()
        run.history.flush()
