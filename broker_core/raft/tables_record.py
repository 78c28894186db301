"""A raft group's tables (ha.group_meta) as a record of its log (`%RAFT_META%`):
committed, replicated and recovered like messages, so a new leader goes on from where
the old one was (raft.stream_group writes them as a leader begins and as they change)."""

from __future__ import annotations

import json
import logging

from broker_core.ha.group_meta import adopt_meta, meta_doc

log = logging.getLogger("floodgate.raft")

META_TOPIC = "%RAFT_META%"
META_EVERY_S = 0.2  # changed tables written at most this often
META_LOOK_S = 0.01  # unchanged tables: looked at again this soon


def write_if_changed(group, now: float):
    """The leader's tables as a record when they changed since it last wrote them (the
    put's result), else None. `group` keeps `_meta_sent` (the tables' version last
    written) and `_meta_due` (not looked at again before then)."""
    if now < group._meta_due:
        return None
    # (a sum over every table: at every drive it was three a send at one in flight)
    version = group.broker.meta_version()
    if version == group._meta_sent:
        group._meta_due = now + META_LOOK_S
        return None
    group._meta_sent, group._meta_due = version, now + META_EVERY_S
    body = json.dumps(meta_doc(group.broker), separators=(",", ":")).encode()
    result = group.broker.store.put(META_TOPIC, 0, body, wait=False)
    if not result.ok:
        log.warning("raft group %s: its tables not replicated: %s", group.group, result.reason)
    return result


def adopt_last(group) -> None:
    """A member's tables from the last such record it holds committed."""
    store = group.broker.store
    last = store.queue_offsets(META_TOPIC, 0)[1] - 1
    got = store.get(META_TOPIC, 0, last, 1).messages
    if got:
        try:
            adopt_meta(group.broker, json.loads(got[0].body))
        except ValueError as exc:
            log.warning("raft group %s: tables record unreadable: %s", group.group, exc)
