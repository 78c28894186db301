"""Broker-side metadata next to the store: consumer-group offsets and group members
(from heartbeats), kept as the broker's other tables are (broker_core.json_table)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from broker_core.json_table import JsonTable, read_json

log = logging.getLogger("floodgate.broker")


class OffsetTable(JsonTable):
    """(group, topic, queue) -> next offset to consume; saved when dirty."""

    def __init__(self, path: Path) -> None:
        self.path = path
        raw = read_json(path)
        self.offsets: dict[tuple[str, str, int], int] = {}
        for group, topics in raw.items():
            for topic, queues in topics.items():
                for qid, offset in queues.items():
                    self.offsets[(group, topic, int(qid))] = int(offset)
        # group -> when an operator last moved its offsets (epoch ms, the same on every
        # broker of the reset): commits from consumers that have not heard of it are stale
        self.resets: dict[str, int] = {}
        self.dirty = False

    def get(self, group: str, topic: str, queue_id: int) -> int:
        return self.offsets.get((group, topic, queue_id), -1)

    def commit(self, group: str, topic: str, queue_id: int, offset: int,
               reset: int | None = None) -> bool:
        """Store a consumer's offset; False (nothing stored) when it comes from before the
        group's last reset (`reset`: the reset the consumer knows of)."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        if (reset or 0) < self.resets.get(group, 0):
            return False
        if self.offsets.get((group, topic, queue_id)) != offset:
            self.offsets[(group, topic, queue_id)] = offset
            self.dirty = True
        return True

    def advance(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Move an offset forward to `offset`, never back (a transaction's commit)."""
        if offset > self.offsets.get((group, topic, queue_id), -1):
            self.offsets[(group, topic, queue_id)] = offset
            self.dirty = True

    def reset(self, group: str, topic: str, offsets: dict[int, int], epoch: int) -> None:
        """An operator moved `group`'s offsets in `topic` (queue -> offset)."""
        for qid, offset in offsets.items():
            self.offsets[(group, topic, qid)] = offset
        self.resets[group] = max(epoch, self.resets.get(group, 0))
        self.dirty = True

    def adopt_resets(self, nested: dict, resets: dict) -> None:
        """A master's resets: a group reset there since takes the master's offsets as
        they are, back as well as forward (merge never moves one back)."""
        for group, epoch in resets.items():
            if not isinstance(epoch, int) or epoch <= self.resets.get(str(group), 0):
                continue
            for key in [k for k in self.offsets if k[0] == group]:
                del self.offsets[key]
            for topic, queues in (nested.get(group) or {}).items():
                for qid, offset in queues.items():
                    self.offsets[(str(group), str(topic), int(qid))] = int(offset)
            self.resets[str(group)] = epoch
            self.dirty = True

    def document(self) -> dict:
        return self.nested()

    def snapshot(self) -> dict:
        # a flat copy (C speed); nesting 10,000 queues' offsets took 7 ms of the loop
        return dict(self.offsets)

    def shaped(self, snapshot: dict) -> dict:
        return _nest(snapshot)

    def drop_topic(self, topic: str) -> int:
        """Forget every group's offsets in `topic` (deleted); how many there were."""
        gone = [k for k in self.offsets if k[1] == topic]
        for key in gone:
            del self.offsets[key]
        self.dirty = self.dirty or bool(gone)
        return len(gone)

    def nested(self) -> dict[str, dict[str, dict[str, int]]]:
        return _nest(self.offsets)

    def merge(self, nested: dict) -> None:
        """Take a master's offsets, never moving one back (a consumer may have
        committed here, on the slave, while its master was away)."""
        for group, topics in nested.items():
            for topic, queues in topics.items():
                for qid, offset in queues.items():
                    key = (str(group), str(topic), int(qid))
                    if int(offset) > self.offsets.get(key, -1):
                        self.offsets[key] = int(offset)
                        self.dirty = True


class GroupMembers:
    """Live members per (group, topic): a member unseen for `expire_s` is gone (three
    of its heartbeats: client.membership.HEARTBEAT_S)."""

    def __init__(self, clock: Callable[[], float], expire_s: float = 15.0) -> None:
        self._clock = clock
        self.expire_s = expire_s
        self._seen: dict[tuple[str, str], dict[str, float]] = {}

    def heartbeat(self, group: str, topic: str, client_id: str, leave: bool = False) -> list[str]:
        members = self._seen.setdefault((group, topic), {})
        if leave:
            members.pop(client_id, None)
        else:
            members[client_id] = self._clock()
        return self.members(group, topic)

    def members(self, group: str, topic: str) -> list[str]:
        now = self._clock()
        members = self._seen.get((group, topic), {})
        for cid in [c for c, t in members.items() if now - t > self.expire_s]:
            del members[cid]
        return sorted(members)

    def groups(self) -> list[tuple[str, str]]:
        return list(self._seen)


def instance_name(group: str, client_id: str) -> str:
    """How a broadcast group's instance is named in the backlog and the console."""
    return f"{group}@{client_id}"


class BroadcastProgress:
    """Where each instance of a broadcast group is, as its heartbeats say.

    A broadcast instance keeps its offsets in its own file (client.offsets_file); the
    broker only hears them, to judge each instance's lag as it judges a group's
    (observe.backlog) and to refuse an operator's reset that could not reach them.
    Not saved: the instance's file is the truth. An instance unheard of for
    `forget_s` is forgotten (until then it reads STOPPED, with its lag)."""

    def __init__(self, clock: Callable[[], float], forget_s: float = 600.0) -> None:
        self._clock = clock
        self.forget_s = forget_s
        # (group, client id) -> (last heard, {(topic, queue): next offset})
        self._instances: dict[tuple[str, str], tuple[float, dict[tuple[str, int], int]]] = {}

    def heard(self, group: str, client_id: str, topic: str, offsets: dict,
              leave: bool = False) -> None:
        key = (group, client_id)
        if leave:
            self._instances.pop(key, None)
            return
        _t, known = self._instances.get(key, (0.0, {}))
        for qid, offset in offsets.items():
            if (isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0
                    and str(qid).isdigit()):
                known[(topic, int(qid))] = offset
        self._instances[key] = (self._clock(), known)

    def _live(self) -> dict[tuple[str, str], tuple[float, dict[tuple[str, int], int]]]:
        now = self._clock()
        for key in [k for k, (t, _o) in self._instances.items() if now - t > self.forget_s]:
            del self._instances[key]
        return self._instances

    def groups(self) -> set[str]:
        """The groups with an instance heard of lately."""
        return {g for g, _c in self._live()}

    def of_group(self, group: str) -> dict[str, dict[tuple[str, int], int]]:
        """client id -> its offsets, for each instance of `group` heard of lately."""
        return {c: dict(known) for (g, c), (_t, known) in self._live().items() if g == group}

    def instances(self) -> dict[str, str]:
        """instance name -> its group."""
        return {instance_name(g, c): g for g, c in self._live()}

    def offsets(self) -> dict[tuple[str, str, int], int]:
        """(instance name, topic, queue) -> next offset, as the backlog samples it."""
        return {(instance_name(g, c), t, q): o for (g, c), (_t, known) in self._live().items()
                for (t, q), o in known.items()}


def _nest(offsets: dict[tuple[str, str, int], int]) -> dict[str, dict[str, dict[str, int]]]:
    """(group, topic, queue) -> offset as the file keeps it: group -> topic -> queue."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for (group, topic, qid), offset in offsets.items():
        out.setdefault(group, {}).setdefault(topic, {})[str(qid)] = offset
    return out
