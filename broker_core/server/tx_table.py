"""What the transaction service keeps apart from the two queues it reads
(server.transactions): the watermarks saved beside the other tables, and a pending
half as it is known in memory; and what a committed half looks like in its real queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from broker_core.protocol.delay import PROP_REAL_QID, PROP_REAL_TOPIC
from broker_core.protocol.system_topics import PROP_COPY_OF
from broker_core.protocol.transactions import PROP_TX_HALF
from broker_core.server.group_state import JsonTable, read_json


class TxTable(JsonTable):
    """The watermarks, the pending halves' check counts, and `done`: the op offset
    before which every commit was finished (server.tx_commits)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        doc = read_json(path)
        self.half = int(doc.get("half", 0))
        self.op = int(doc.get("op", 0))
        self.done = int(doc.get("done", 0))
        self.checks: dict[int, int] = {int(k): int(v) for k, v in doc.get("checks", {}).items()}
        self.dirty = False

    def document(self) -> dict:
        return {"half": self.half, "op": self.op, "done": self.done,
                "checks": {str(k): v for k, v in sorted(self.checks.items())}}

    def adopt(self, doc: dict) -> None:
        """A master's table (a slave promoted reads on from there)."""
        try:
            half, op, done = int(doc["half"]), int(doc["op"]), int(doc.get("done", 0))
            checks = {int(k): int(v) for k, v in doc.get("checks", {}).items()}
        except (KeyError, TypeError, ValueError):
            return
        if (half, op, done, checks) != (self.half, self.op, self.done, self.checks):
            self.half, self.op, self.done, self.checks = half, op, done, checks
            self.dirty = True


@dataclass
class Half:
    offset: int  # in the half queue: the transaction's handle
    group: str  # its producer group: who is asked back
    topic: str  # where it goes when committed
    stored_ms: int
    msg_id: str
    checks: int = 0
    next_check_ms: int = 0
    made_from: str = ""  # a transform's output: the input it was made of (TOPIC:QUEUE:OFFSET)


def committed_copy_props(m) -> dict[str, str] | None:
    """A committed half's properties in its real queue: without the half's own, with
    the half's id."""
    props = {k: v for k, v in (m.properties or {}).items()
             if k not in (PROP_REAL_TOPIC, PROP_REAL_QID, PROP_TX_HALF, "TAGS", "KEYS")}
    props[PROP_COPY_OF] = m.msg_id
    return props
