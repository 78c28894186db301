"""The tables a group's leader hands its replicas besides the log: topics, consumer
offsets (and resets), delayed delivery's progress, queue locks, pending transactions,
the ACL. A master/slave group streams them on its HA link (ha META); a raft group
commits them as a record of its log (raft.group). A replica that adopts them and is
promoted goes on from there."""

from __future__ import annotations


def meta_doc(broker) -> dict:
    return {"topics": broker.topics.document(),
            "offsets": broker.offsets.nested(),
            "offset_resets": dict(broker.offsets.resets),
            "delay": broker.delay_offsets.document(),
            "locks": broker.locks.document(),
            "tx": broker.tx_table.document(),
            "acl": broker.acl.document()}


def adopt_meta(broker, doc: dict) -> None:
    broker.woke()  # the tables changed: saved by the tick
    topics, offsets, delay = doc.get("topics"), doc.get("offsets"), doc.get("delay")
    if isinstance(topics, dict):
        broker.topics.adopt(topics)
    if isinstance(offsets, dict):
        resets = doc.get("offset_resets")
        if isinstance(resets, dict):  # before merge: a reset may move offsets back
            broker.offsets.adopt_resets(offsets, resets)
        broker.offsets.merge(offsets)
    if isinstance(delay, dict):  # delayed delivery goes on from there when promoted
        broker.delay_offsets.merge(delay)
    if isinstance(locks := doc.get("locks"), list):  # orderly consumers keep their queues
        broker.locks.adopt(locks)
    if isinstance(tx := doc.get("tx"), dict):  # pending halves found from there when promoted
        broker.tx_table.adopt(tx)
    if isinstance(acl := doc.get("acl"), dict):  # a promoted replica enforces the same rules
        broker.acl.adopt(acl)
