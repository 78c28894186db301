"""What a stored message is when it is a copy of another, and a message's copies in the
order they were made, so that `floodgate trace` tells one path and not several strangers.

Ids name a place in a log, so every copy has an id of its own. Who makes copies:
- a delayed send is stored in %SCHEDULE%; when due, the broker's delay service stores
  it in its real topic (COPY_OF: the schedule copy's id);
- a committed transaction's half, in %TX_HALF%, is stored in its real topic (COPY_OF);
- a consumer of group G that fails a message sends it back: through %SCHEDULE% to
  %RETRY%G, or past its tries to %DLQ%G, keeping ORIGIN_MSG_ID and RETRY_TIMES
  (client.retry);
- `floodgate dlq resend` sends a dead letter to its first topic, ORIGIN_MSG_ID kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.protocol.delay import LEVELS_S, PROP_DELAY, PROP_REAL_TOPIC, SCHEDULE_TOPIC
from broker_core.protocol.system_topics import (
    DLQ_PREFIX,
    PROP_COPY_OF,
    PROP_ORIGIN_ID,
    PROP_RETRY_TIMES,
    RETRY_PREFIX,
)
from broker_core.protocol.transactions import HALF_TOPIC

DELAYED = "delayed"  # in %SCHEDULE%, waiting for its level's delay
DUE = "due"  # stored by the broker's delay service from a %SCHEDULE% copy
COMMITTED = "committed"  # stored by the broker from a committed transaction's half
HALF = "half"  # a transaction's half, not visible to consumers
DEAD = "dead letter"  # in %DLQ%G
RESENT = "resent"  # a dead letter sent back to its first topic
MADE_BY_BROKER = (DUE, COMMITTED)  # no producer sent these: no send record to expect


@dataclass(frozen=True)
class Copy:
    kind: str
    origin: str = ""  # the id the message was first stored under (a retry's, a resend's)
    made_from: str = ""  # the stored message the broker copied (COPY_OF)
    group: str = ""  # the consumer group whose retry or dead letter it is
    tries: int = 0  # RETRY_TIMES: how many times a group sent it back
    to_topic: str = ""  # a delayed copy: where it goes when due
    due_ms: int | None = None  # a delayed copy: when

    @property
    def sent_back(self) -> bool:
        return self.tries > 0 and self.kind != RESENT


def copy_of(doc: dict) -> Copy | None:
    """What the message document ``doc`` (lookup_ops.message_doc) is a copy of; None for
    a message as its producer sent it."""
    props = doc.get("properties") or {}
    topic = doc["topic"]
    origin, made_from = props.get(PROP_ORIGIN_ID, ""), props.get(PROP_COPY_OF, "")
    try:
        tries = int(props.get(PROP_RETRY_TIMES) or 0)
    except ValueError:
        tries = 0
    group = next((topic[len(p):] for p in (RETRY_PREFIX, DLQ_PREFIX) if topic.startswith(p)),
                 "")
    if topic == SCHEDULE_TOPIC:
        to_topic = props.get(PROP_REAL_TOPIC, "")
        if to_topic.startswith(RETRY_PREFIX):
            group = to_topic[len(RETRY_PREFIX):]
        level = doc["queue_id"] + 1  # queue level-1 holds level `level`
        due = doc["store_ms"] + LEVELS_S[level - 1] * 1000 if level <= len(LEVELS_S) else None
        return Copy(DELAYED, origin, made_from, group, tries, to_topic, due)
    if topic == HALF_TOPIC:
        return Copy(HALF, origin, made_from, group, tries, props.get(PROP_REAL_TOPIC, ""))
    if topic.startswith(DLQ_PREFIX):
        return Copy(DEAD, origin, made_from, group, tries)
    if made_from:
        kind = DUE if PROP_DELAY in props else COMMITTED  # a due copy keeps its level
        return Copy(kind, origin, made_from, group, tries)
    if topic.startswith(RETRY_PREFIX):  # stored before COPY_OF was kept: moved when due
        return Copy(DUE, origin, made_from, group, tries)
    if origin:
        return Copy(RESENT, origin, made_from, group, tries)
    return None


def path_root(doc: dict, made_from_root: dict[str, str]) -> str:
    """The id of the first message of the path ``doc`` is on: its origin, else the root of
    what it was copied from (``made_from_root``: id -> root, of the copies known), else
    its own id."""
    c = copy_of(doc)
    if c is None:
        return doc["id"]
    if c.origin:
        return c.origin
    if c.made_from:
        return made_from_root.get(c.made_from, c.made_from)
    return doc["id"]


def paths(docs) -> list[list[dict]]:
    """``docs`` grouped by the path each is on, a path in the order it was stored; paths
    newest first, by their newest message."""
    roots: dict[str, str] = {}
    for d in sorted(docs, key=lambda d: d["store_ms"]):  # a copy is stored after its source
        roots[d["id"]] = path_root(d, roots)
    grouped: dict[str, list[dict]] = {}
    for d in docs:
        grouped.setdefault(roots[d["id"]], []).append(d)
    ordered = sorted(grouped.values(), key=lambda p: -max(d["store_ms"] for d in p))
    return [sorted(p, key=lambda d: (d["store_ms"], d["id"])) for p in ordered]


def in_paths(docs) -> list[dict]:
    """``docs`` with each message's copies right after it (`paths`, one after another)."""
    return [d for p in paths(docs) for d in p]


def describe(c: Copy, clock) -> str:
    """One line on what the copy is (``clock``: ms -> the time of day shown)."""
    retry = f"retry {c.tries} of {c.origin or 'a message'} for group {c.group}"
    if c.kind == DELAYED:
        due = f"due {clock(c.due_ms)}" if c.due_ms else "due at an unknown level"
        what = retry if c.sent_back else "delayed by its producer"
        return f"{what}: held in {SCHEDULE_TOPIC} until {due}, then stored in {c.to_topic}"
    if c.kind == DUE:
        src = f" from {c.made_from}" if c.made_from else ""
        what = f"{retry}, " if c.sent_back else ""
        return f"{what}stored by the broker's delay service when due{src}"
    if c.kind == COMMITTED:
        return f"stored by the broker when its transaction committed, from half {c.made_from}"
    if c.kind == HALF:
        return f"a transaction's half: stored in {c.to_topic} if it commits"
    if c.kind == DEAD:
        return (f"dead letter of {c.origin or 'a message'} for group {c.group}, after "
                f"{c.tries} tries: no consumer reads it (floodgate dlq show {c.group})")
    return f"a dead letter resent to its topic; first stored as {c.origin}"
