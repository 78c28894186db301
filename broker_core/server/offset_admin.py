"""A consumer group's offsets on one broker, as an operator reads and moves them (the
HTTP side serves them at /admin/offsets; `floodgate offsets`).

A reset names where to: the earliest message kept, the end (skip the backlog), the
first message stored at or after a time (a binary search on store time in each
queue: store.offset_at_time), or N messages on (back with a negative N). It
answers each queue's old and new offset; unless `dry_run`, it writes them and marks
the group reset at `epoch` (the same on every broker of one reset): the group's
consumers hear of it with their next heartbeat or commit, drop what they hold and
go on from the new offsets, and a commit from before it is not stored.
"""

from __future__ import annotations

from typing import Any

RESET_TO = ("earliest", "latest", "time", "by")
RESET_FIELDS = {"group", "topic", "to", "value", "epoch", "dry_run"}


class OffsetResetError(ValueError):
    pass


def describe(broker, group: str, topic: str | None = None) -> dict[str, Any]:
    """The group's offsets here, per queue it has one on (of `topic`, or all):
    committed, min and max offset, lag, and when the message at the committed offset
    was stored (None: nothing there yet)."""
    store = broker.store
    rows = []
    known = dict(broker.offsets.offsets)
    for key in (broker.pops.queues if broker.pops is not None else ()):  # popped, none
        known.setdefault(key, 0)  # committed yet: from the queue's start
    for (g, t, qid), committed in sorted(known.items()):
        if g != group or (topic is not None and t != topic):
            continue
        lo, hi = store.queue_offsets(t, qid)
        rows.append({"topic": t, "queue": qid, "committed": committed, "min": lo, "max": hi,
                     "lag": max(0, hi - committed),
                     "committed_time_ms": store.store_time_at(t, qid, committed),
                     # handed to a RocketMQ client, not acknowledged yet (grpc_front.pop)
                     **({"in_flight": broker.pops.in_flight(group, t, qid)}
                        if broker.pops is not None else {})})
    instances = []  # a broadcast group's: each instance's own offsets, as it last said
    for cid, known in sorted(broker.broadcast.of_group(group).items()):
        for (t, qid), committed in sorted(known.items()):
            if topic is None or t == topic:
                hi = store.queue_offsets(t, qid)[1]
                instances.append({"instance": cid, "topic": t, "queue": qid,
                                  "committed": committed, "max": hi,
                                  "lag": max(0, hi - committed)})
    doc = {"broker": broker.config.name, "role": broker.role_name(), "group": group,
           "reset_ms": broker.offsets.resets.get(group, 0), "queues": rows,
           "instances": instances}
    if broker.pops is not None:  # a RocketMQ client's receives waiting for a message
        doc["receives_waiting"] = broker.pops.waiting.get(group, 0)
    return doc


def reset(broker, body: dict[str, Any]) -> dict[str, Any]:
    """{group, topic, to, value?, epoch, dry_run?} -> each queue's old and new offset;
    OffsetResetError (nothing written) on bad input."""
    group, topic, to = body.get("group"), body.get("topic"), body.get("to")
    if not isinstance(group, str) or not group or not isinstance(topic, str) or not topic:
        raise OffsetResetError("group and topic must be non-empty strings")
    if to not in RESET_TO:
        raise OffsetResetError(f"to must be one of {', '.join(RESET_TO)}, not {to!r}")
    value = body.get("value")
    if to in ("time", "by") and (isinstance(value, bool) or not isinstance(value, int)):
        raise OffsetResetError(f"to {to} needs a whole-number value, not {value!r}")
    epoch = body.get("epoch")
    if not body.get("dry_run") and epoch is None:
        raise OffsetResetError(
            "epoch is missing: the reset's time in ms since 1970, the same on every broker "
            "of one reset, so that consumers drop their commits from before it (`floodgate "
            "offsets reset` sets it; a dry_run needs none)")
    if not body.get("dry_run") and (isinstance(epoch, bool) or not isinstance(epoch, int)
                                    or epoch <= 0):
        raise OffsetResetError(f"epoch must be a positive whole number (ms), not {epoch!r}")
    if group in broker.broadcast.groups():
        raise OffsetResetError(
            f"group {group!r} consumes in broadcast mode: each instance keeps its offsets in "
            f"a file of its own (stop the instance, then edit or remove that file)")
    queues = broker.topics.get(topic, create=False)
    if queues is None:
        raise OffsetResetError(f"topic {topic!r} does not exist on {broker.config.name}")
    store, table = broker.store, broker.offsets
    rows, new = [], {}
    for qid in range(queues):
        lo, hi = store.queue_offsets(topic, qid)
        old = table.get(group, topic, qid)
        if to == "earliest":
            target = lo
        elif to == "latest":
            target = hi
        elif to == "time":
            target = store.offset_at_time(topic, qid, value)
        else:
            target = (old if old >= 0 else lo) + value
            if not lo <= target <= hi:
                raise OffsetResetError(
                    f"--by {value} moves queue {qid} of {topic} on {broker.config.name} to "
                    f"{target}, outside what it holds ({lo}..{hi})")
        rows.append({"topic": topic, "queue": qid, "old": old, "new": target, "min": lo,
                     "max": hi})
        new[qid] = target
    applied = not body.get("dry_run")
    if applied:
        table.reset(group, topic, new, epoch)
    return {"broker": broker.config.name, "role": broker.role_name(), "group": group,
            "applied": applied, "queues": rows}
