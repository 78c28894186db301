"""The broker's control operations: ROUTE, QUERY_OFFSET, COMMIT_OFFSET, HEARTBEAT,
LOCK_BATCH, UNLOCK_BATCH, STATS and HA_STATE (PROTOCOL.md). Each takes the broker and
a request's JSON body and answers (code, body); the broker's `handle` turns a
ProtocolError or ValueError into BAD_REQUEST.
"""

from __future__ import annotations

import asyncio
import os

from broker_core import protocol as p
from broker_core.protocol import Code
from broker_core.protocol.system_topics import check_group
from broker_core.raft.stream_election import NotLeader
from broker_core.server.group_state import instance_name

MAX_WATCH_S = 30.0  # a held HA_STATE answers by then (under the client's call timeout)


def _lock_request(body: bytes) -> tuple[str, str, str, list[int]]:
    req = p.decode_json(body)
    group, client, topic = (str(req.get(k) or "") for k in ("group", "client_id", "topic"))
    qids = req.get("queues")
    check_group(group)
    if not (client and topic) or not isinstance(qids, list) or not all(
            type(q) is int and q >= 0 for q in qids):
        raise p.ProtocolError("a lock request needs group, client_id, topic and queues "
                              "(a list of queue ids)")
    return group, client, topic, qids


async def route(broker, body: bytes) -> tuple[int, bytes]:
    req = p.decode_json(body)
    topic = str(req.get("topic", ""))
    queues = broker.topics.get(topic, create=bool(req.get("create")))
    if queues is None:
        return Code.TOPIC_NOT_EXIST, f"topic {topic!r} does not exist".encode()
    return Code.OK, p.encode_json({"topic": topic, "queues": queues,
                                   "perm": broker.topics.perm(topic),
                                   "writable": broker.topics.writable})


async def query_offset(broker, body: bytes) -> tuple[int, bytes]:
    req = p.decode_json(body)
    group, topic, qid = str(req["group"]), str(req["topic"]), int(req["queue_id"])
    lo, hi = broker.store.queue_offsets(topic, qid)
    return Code.OK, p.encode_json(
        {"offset": broker.offsets.get(group, topic, qid), "min_offset": lo, "max_offset": hi}
    )


async def commit_offset(broker, body: bytes) -> tuple[int, bytes]:
    """One queue's offset (`queue_id`, `offset`), or several (`offsets`: queue id ->
    offset): a consumer commits what it read of a broker in one request."""
    req = p.decode_json(body)
    group = check_group(str(req.get("group", "")))
    try:
        topic, reset = str(req["topic"]), int(req.get("reset", 0))
        many = req.get("offsets")
        if many is None:
            many = {req["queue_id"]: req["offset"]}
        elif not isinstance(many, dict):
            return broker.bad("offsets must be an object: queue id -> offset")
        stored = broker.committed(group, topic, [(int(q), int(o)) for q, o in many.items()],
                                  reset)
    except KeyError as exc:
        return broker.bad(f"missing field {exc}")
    if not stored:  # the consumer has not heard of an operator's reset yet
        return Code.OK, p.encode_json({"stale": True,
                                       "reset": broker.offsets.resets.get(group, 0)})
    return Code.OK, b"{}"


async def heartbeat(broker, body: bytes) -> tuple[int, bytes]:
    req = p.decode_json(body)
    group, topic = check_group(str(req.get("group", ""))), str(req.get("topic", ""))
    queues = broker.topics.get(topic, create=False) or 0
    if req.get("broadcast"):  # an instance that keeps its own offsets: heard, not a member
        cid, offsets = str(req.get("client_id", "")), req.get("offsets")
        broker.broadcast.heard(group, cid, topic, offsets if isinstance(offsets, dict) else {},
                             bool(req.get("leave")))
        broker.backlog.heard(instance_name(group, cid))
        return Code.OK, p.encode_json({"members": [cid], "queues": queues})
    if not req.get("leave"):
        broker.backlog.heard(group)
    cid, leave = str(req.get("client_id", "")), bool(req.get("leave"))
    members = broker.members.heartbeat(group, topic, cid, leave)
    doc = {"members": members, "queues": queues, "reset": broker.offsets.resets.get(group, 0)}
    also = req.get("also")  # more topics of the group (its retry topic), one beat for all
    if isinstance(also, list):
        doc["also"] = {str(t): {"members": broker.members.heartbeat(group, str(t), cid, leave),
                                "queues": broker.topics.get(str(t), create=False) or 0}
                       for t in also[:8]}
    return Code.OK, p.encode_json(doc)


async def lock_batch(broker, body: bytes) -> tuple[int, bytes]:
    group, client, topic, qids = _lock_request(body)
    if (refused := broker.write_refusal()) is not None:
        return refused  # only a master grants: its slaves learn its locks (ha.node)
    locked = broker.locks.lock(group, client, topic, qids)
    return Code.OK, p.encode_json({"locked": locked, "lease_s": broker.locks.lease_s,
                                   "epochs": broker.locks.epochs(group, client, topic, locked)})


async def unlock_batch(broker, body: bytes) -> tuple[int, bytes]:
    group, client, topic, qids = _lock_request(body)
    return Code.OK, p.encode_json({"unlocked": broker.locks.unlock(group, client, topic,
                                                                 qids)})


async def stats(broker, body: bytes) -> tuple[int, bytes]:
    history = int(p.decode_json(body).get("history", 0))
    return Code.OK, p.encode_json(broker.stats(history))


async def ha_state(broker, body: bytes) -> tuple[int, bytes]:
    """The broker's role in its group. A raft member's answer waits (a watch, as a
    ZooKeeper one: a client's routes cost nothing while nothing changes) when the body
    names the term and leader the caller knows and `wait_s`: until either changes."""
    ha = broker.ha
    req = p.decode_json(body) if body and ha is not None and hasattr(ha, "changed") else {}
    if "wait_s" in req:
        try:
            known = (int(req["term"]), str(req["leader"]))
            wait_s = min(float(req["wait_s"]), MAX_WATCH_S)
        except (KeyError, TypeError, ValueError) as exc:
            return Code.BAD_REQUEST, f"HA_STATE takes term, leader and wait_s: {exc}".encode()
        if (ha.epoch, ha.node.leader or "") == known and wait_s > 0:
            try:
                await asyncio.wait_for(ha.changed.wait(), wait_s)
            except TimeoutError:
                pass
    cl = broker.store.commitlog
    doc = {"name": broker.config.name, "offset": cl.write_offset, "group": None,
           "pid": os.getpid()}
    if broker.ha is not None:
        doc.update(broker.ha.figures())
    return Code.OK, p.encode_json(doc)


async def step_aside(broker, body: bytes) -> tuple[int, bytes]:
    """A client's fuse found this raft leader slow: it hands its group to a follower if
    the operator allows it (raft.step_aside). The answer says whether it moved, and why
    not."""
    ha = broker.ha
    if ha is None or not hasattr(ha, "step_aside"):
        return Code.BAD_REQUEST, (f"{broker.config.name} is not in a raft group: only a "
                                  "raft leader steps aside").encode()
    reason = str(p.decode_json(body).get("reason", ""))[:200]
    try:
        return Code.OK, p.encode_json(ha.step_aside(reason))
    except NotLeader as exc:
        return Code.NOT_MASTER, str(exc).encode()
