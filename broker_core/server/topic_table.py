"""A broker's topics: queues per topic, read/write permission per topic and for the
whole broker, and the topics an operator deleted.

Permissions follow RocketMQ's `updateTopic -p` and `wipeWritePerm`: a topic may be
read-write (the default), read-only (drain it: consumers finish, producers go to
other brokers) or write-only; a broker whose writes are wiped refuses every send
(producers go to the other brokers) while its consumers read what it holds, the
way a broker is emptied before maintenance. A refused request is answered
NO_PERMISSION and stores nothing.

Saved as topics.json: ``{"topics": {name: queues}, "perms": {name: "r"|"w"|"-"},
"writable": bool, "deleted": {name: wall time}}`` (perms only where not "rw").
The first format, ``{name: queues}``, is read as all read-write.
"""

from __future__ import annotations

import logging
from pathlib import Path

from broker_core.errors import BrokerError
from broker_core.json_table import JsonTable, read_json
from broker_core.names import MAX_TOPIC, NAME_RULE, TOPIC_RE, topic_problem
from broker_core.protocol.delay import SCHEDULE_TOPIC
from broker_core.protocol.system_topics import ALWAYS_CREATED
from broker_core.protocol.transactions import HALF_TOPIC, OP_TOPIC

log = logging.getLogger("floodgate.broker")
PERMS = ("rw", "r", "w", "-")
MAX_QUEUES = 1024  # per topic per broker (RocketMQ's default writeQueueNums is 16)
# The broker's own topics: it writes and reads them through its store (delayed messages,
# transactions' halves and decisions), no client does, so they are not in the table. A
# slave learnt them from the records it copied and a restarted master from its store:
# `topic list` showed a group's slave with three topics more than its master.
BROKER_OWN = (SCHEDULE_TOPIC, HALF_TOPIC, OP_TOPIC)


class TopicError(BrokerError):
    pass


def check_perm(perm: str) -> str:
    if perm not in PERMS:
        raise TopicError(f"permission must be one of {', '.join(PERMS)}, not {perm!r}")
    return perm


def check_name(topic: str) -> str:
    if (problem := topic_problem(topic)) is not None:
        raise TopicError(problem)
    if topic in BROKER_OWN:
        raise TopicError(broker_own(topic))
    return topic


def broker_own(topic: str) -> str:
    """Why a client may not send to (or an operator create) one of the broker's topics:
    an op record written into %TX_OP% by a client would settle a stranger's transaction."""
    return (f"topic {topic!r} is the broker's own (delayed messages, transactions): only "
            "the broker writes it")


class TopicTable(JsonTable):
    """topic -> number of queues, created on first send unless auto-create is off."""

    def __init__(self, path: Path, default_queues: int = 4, auto_create: bool = True) -> None:
        self.path = path
        self.default_queues = default_queues
        self.auto_create = auto_create
        self.queues: dict[str, int] = {}
        self.perms: dict[str, str] = {}  # only topics that are not "rw"
        self.writable = True  # the broker's own write permission (wipe-write)
        self.deleted: dict[str, float] = {}
        self.dirty = False
        self._load(read_json(path))

    def _load(self, doc: dict) -> None:
        if isinstance(doc.get("topics"), dict):
            self.queues = {str(k): int(v) for k, v in doc["topics"].items()}
            self.perms = {str(k): check_perm(str(v)) for k, v in
                          (doc.get("perms") or {}).items() if v != "rw"}
            self.writable = doc.get("writable", True) is not False
            self.deleted = {str(k): float(v) for k, v in (doc.get("deleted") or {}).items()}
        else:  # the first format: name -> queues
            self.queues = {str(k): int(v) for k, v in doc.items()}
        for topic in [t for t in self.queues if t in BROKER_OWN]:
            del self.queues[topic]  # saved so by an earlier version: forgotten quietly
            self.perms.pop(topic, None)
            self.dirty = True
        for topic in [t for t in self.queues if not TOPIC_RE.match(t)]:
            # made when the table's rule let "." in; the store refused every send to it,
            # so it holds nothing: forgotten (and saved so) with a word in the log
            log.warning("topic %r dropped from the table: its name is not one the store "
                        "can write (1-%d of %s); it held no messages", topic, MAX_TOPIC,
                        NAME_RULE)
            del self.queues[topic]
            self.perms.pop(topic, None)
            self.dirty = True

    def document(self) -> dict:
        return {"topics": dict(self.queues), "perms": dict(self.perms),
                "writable": self.writable, "deleted": dict(self.deleted)}

    # -- what sends and pulls ask ------------------------------------------------------
    def get(self, topic: str, create: bool) -> int | None:
        n = self.queues.get(topic)
        if n is None and create and topic not in BROKER_OWN and (
                self.auto_create or topic.startswith(ALWAYS_CREATED)):
            check_name(topic)
            # saved by the tick: lost in a crash before it, the topic comes back from
            # the store's queues when the broker opens (`recover`)
            n = self.queues[topic] = self.default_queues
            self.deleted.pop(topic, None)
            self.dirty = True
        return n

    def perm(self, topic: str) -> str:
        return self.perms.get(topic, "rw")

    def write_refusal(self, topic: str, broker: str) -> str | None:
        """Why a send to `topic` is refused here (None: it is not)."""
        if not self.writable:
            return f"{broker}'s writes are wiped (maintenance): send to another broker"
        if "w" not in self.perm(topic):
            return f"topic {topic!r} is not writable on {broker} (permission {self.perm(topic)})"
        return None

    def read_refusal(self, topic: str, broker: str) -> str | None:
        if "r" not in self.perm(topic):
            return f"topic {topic!r} is not readable on {broker} (permission {self.perm(topic)})"
        return None

    # -- what an operator changes ------------------------------------------------------
    def put(self, topic: str, queues: int | None = None, perm: str | None = None
            ) -> tuple[int, str]:
        """Create `topic` or change it: queues may only grow (messages in the queues
        given up would be stranded). Returns (queues, permission) now."""
        check_name(topic)
        have = self.queues.get(topic)
        if queues is not None and not 1 <= queues <= MAX_QUEUES:
            raise TopicError(f"queues must be 1..{MAX_QUEUES}, not {queues}")
        if queues is not None and have is not None and queues < have:
            raise TopicError(f"{topic} has {have} queues here; they can only grow (messages "
                             f"in queues {queues}..{have - 1} would be stranded)")
        n = queues or have or self.default_queues
        self.queues[topic] = n
        if perm is not None:
            check_perm(perm)
            if perm == "rw":
                self.perms.pop(topic, None)
            else:
                self.perms[topic] = perm
        self.deleted.pop(topic, None)
        self.dirty = True
        return n, self.perm(topic)

    def delete(self, topic: str, now: float) -> bool:
        """Forget `topic` (its messages stay in the CommitLog until retention); False
        if it was not here. Remembered as deleted, so recovery does not make it again."""
        if topic not in self.queues:
            return False
        del self.queues[topic]
        self.perms.pop(topic, None)
        self.deleted[topic] = now
        self.dirty = True
        return True

    def set_writable(self, writable: bool) -> None:
        if self.writable != writable:
            self.writable = writable
            self.dirty = True

    # -- recovery and replication ------------------------------------------------------
    def recover(self, stored: list[tuple[str, int]]) -> list[str]:
        """Topics the store holds queues of but the table lost (created on a send just
        before a crash, the table not yet saved): made again as auto-creation made them,
        unless an operator deleted them. Returns the topics added."""
        highest: dict[str, int] = {}
        for topic, qid in stored:
            highest[topic] = max(highest.get(topic, 0), qid + 1)
        added = [t for t in highest if t not in self.queues and t not in self.deleted
                 and TOPIC_RE.match(t) and t not in BROKER_OWN]
        for topic in added:
            self.queues[topic] = max(highest[topic], self.default_queues)
        self.dirty = self.dirty or bool(added)
        return added

    def grow(self, queues: dict[str, int]) -> bool:
        """Topics a slave learns from the records it receives; True if changed."""
        changed = False
        for topic, n in queues.items():
            if topic in BROKER_OWN:
                continue
            if TOPIC_RE.match(str(topic)) and int(n) > self.queues.get(topic, 0):
                self.queues[str(topic)] = int(n)
                changed = True
        self.dirty = self.dirty or changed
        return changed

    def adopt(self, doc: dict) -> None:
        """Take a master's table (a slave keeps its master's, so a promoted slave has
        the same topics and permissions); topics only the records announced so far
        stay until the master's table names them."""
        if not isinstance(doc.get("topics"), dict):  # the first format: queues only
            self.grow(doc)
            return
        master = TopicTable.__new__(TopicTable)
        master._load(doc)
        extra = {t: n for t, n in self.queues.items()
                 if t not in master.queues and t not in master.deleted}
        new = ({**master.queues, **extra}, master.perms, master.writable, master.deleted)
        if new != (self.queues, self.perms, self.writable, self.deleted):
            self.queues, self.perms, self.writable, self.deleted = new
            self.dirty = True
