"""What a group's replica does besides holding the log: the tables its leader hands it
(topics, consumer offsets and resets, delayed delivery's progress, queue locks, pending
transactions, the ACL, what a gRPC front end handed out; a master/slave group streams
them on its HA link, ha META, a raft group commits them as a record of its log,
raft.tables_record), so that promoted it goes on from there; and what the records it was given
mean to it (`records_arrived`)."""

from __future__ import annotations


def meta_doc(broker) -> dict:
    pops = broker.pops  # a gRPC front end's receipts (grpc_front.pop)
    return {**({"pops": pops.document()} if pops is not None else {}),
            "topics": broker.topics.document(),
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
    if isinstance(pops := doc.get("pops"), dict) and broker.pops is not None:
        broker.pops.adopt(pops)  # what RocketMQ clients hold stays theirs when promoted


def records_arrived(broker, touched: set[tuple[str, int]]) -> None:
    """Records of these (topic, queue id) became readable here (replicated, or
    committed): topics grow to hold them, pulls held on them wake."""
    broker.woke()  # the tick counts what it now holds
    new = {t: max(broker.config.default_queues, q + 1) for t, q in touched
           if broker.topics.queues.get(t, 0) <= q}
    if new:
        broker.topics.grow(new)
    for topic, qid in touched:
        broker.pulls.arrived(topic, qid)
