"""An operator's topic changes on one broker and the broker's view of its topics
(the HTTP side serves them under /admin/topic and /admin/write).

Listing stays quick at 10,000 queues: per topic the queues, the permission and the
messages held; per queue only the hottest (observe.queue_heat) with their depth.
"""

from __future__ import annotations

import asyncio
from typing import Any

from broker_core.server.topic_table import TopicError, check_perm

TOPIC_FIELDS = {"topic", "queues", "perm"}
HOTTEST = 20


def describe(broker, topic: str | None = None, hottest: int = HOTTEST) -> dict[str, Any]:
    """Every topic (or one) with its queues, permission and messages held, the
    hottest queues with their depth, and the broker's own write permission."""
    table, store = broker.topics, broker.store
    names = sorted(table.queues) if topic is None else [topic] if topic in table.queues else []
    rows = []
    for name in names:
        held = 0
        for qid in range(table.queues[name]):
            lo, hi = store.queue_offsets(name, qid)
            held += hi - lo
        rows.append({"topic": name, "queues": table.queues[name], "perm": table.perm(name),
                     "messages": held})
    top = [q for q in broker.heat.report(queue_depth(store),
                                         lambda t: table.queues.get(t, 0), hottest)
           if topic is None or q["topic"] == topic]
    return {"broker": broker.config.name, "role": broker.role_name(),
            "writable": table.writable,
            "auto_create": table.auto_create, "queue_count": sum(table.queues.values()),
            "topics": rows, "hottest": top}


def queue_depth(store):
    """Messages a queue holds (what retention has not removed)."""
    def depth(topic: str, queue: int) -> int:
        lo, hi = store.queue_offsets(topic, queue)
        return hi - lo
    return depth


def put(broker, body: dict[str, Any]) -> dict[str, Any]:
    """Create or change a topic from {topic, queues?, perm?}; TopicError on bad input."""
    topic = body.get("topic")
    if not isinstance(topic, str):
        raise TopicError("topic must be a string")
    queues = body.get("queues")
    if queues is not None and (isinstance(queues, bool) or not isinstance(queues, int)):
        raise TopicError(f"queues must be a whole number, not {queues!r}")
    perm = body.get("perm")
    if perm is not None:
        check_perm(perm)
    broker.topics.put(topic, queues, perm)
    return describe(broker, topic)


async def delete(broker, topic: str) -> dict[str, Any]:
    """Forget `topic` here: its queues' files and every group's offsets in it; its
    messages stay in the CommitLog until retention. {deleted, queues}."""
    queues = broker.topics.queues.get(topic, 0)
    if not broker.topics.delete(topic, broker.clock()):
        return {"deleted": False, "queues": 0}
    broker.offsets.drop_topic(topic)
    broker.heat.forget_topic(topic)
    loop = asyncio.get_running_loop()
    # off the loop: the files go and the checkpoint is written (sends keep being served)
    await loop.run_in_executor(None, broker.store.drop_topic, topic)
    await save_tables(broker)
    return {"deleted": True, "queues": queues}


def set_writable(broker, writable: bool) -> dict[str, Any]:
    broker.topics.set_writable(writable)
    return {"broker": broker.config.name, "writable": broker.topics.writable}


async def save_tables(broker) -> None:
    """An operator's change is kept at once, not at the next tick: what changed is taken
    on the loop (where the tables change) and written off it, as the tick does."""
    write = broker.save_tables()
    if write is not None:
        await asyncio.get_running_loop().run_in_executor(None, write)
