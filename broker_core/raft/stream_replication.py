"""The two ends of a raft group's stream (raft.stream_group): the master's replication
(ha.master, ha.slave) with Raft's rules for what is committed.

- `QuorumMaster`, the leader's end: a send is answered once a majority of the voters
  hold it, the leader among them, and readers see up to there (the confirm gate). Only
  an offset past where the leader's term began counts (the Raft paper, 5.4.2): bytes
  of older terms are committed by the first record of its own, never by counting them.
  A leader that stops leading keeps what no majority acknowledged out of its queues.
- `StreamFollower`, a follower's end: bytes are held as they come and acknowledged up
  to the last record they complete (in sync flush mode, once on disk); readers see them
  once the leader says a majority holds them, and never past what this leader sent (until its WELCOME, a tail of an
  older term may differ from the leader's log).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable

from broker_core.ha import wire
from broker_core.ha.master import ReplicationMaster
from broker_core.ha.slave import ReplicaClient
from broker_core.protocol import Code

log = logging.getLogger("floodgate.raft")


class QuorumMaster(ReplicationMaster):
    def __init__(self, store, group: str, name: str, voters: Callable[[], frozenset[str]],
                 fed: Callable[[], frozenset[str]], configs: Callable[[int, int], list],
                 **kw) -> None:
        """`voters`: whose acks count; `fed`: who may link (voters and learners);
        `configs(start, end)`: the configurations whose records lie in [start, end),
        sent ahead of their bytes (raft.stream_members)."""
        super().__init__(store, group, sync=True, persist=None, **kw)
        self.name, self._voters, self._fed, self._configs = name, voters, fed, configs
        self.term_start = 0  # where this leader's term began: only past it counts
        self.committed = -1
        # members whose log ends before this leader's first byte: why (the stream cannot
        # catch them up; raft.stream_members answers an operator's change with it)
        self.behind: dict[str, str] = {}

    def _target(self) -> int:
        """The offset a majority holds (-1: none past the term's start yet)."""
        voters = self._voters()
        need = len(voters) // 2 + 1 - (self.name in voters)  # followers a majority needs
        if need == 0:
            target = self.store.commitlog.write_offset
        else:
            acks = sorted((self.acked.get(n, -1) for n in voters if n != self.name),
                          reverse=True)
            target = acks[need - 1] if len(acks) >= need else -1
        return target if target > self.term_start else -1

    def commit_offset(self) -> int:
        return self.committed

    def configs_between(self, start: int, end: int) -> list:
        return self._configs(start, end)

    def _no_slave(self) -> Code | None:
        return None  # (no in-sync set: a send waits for a majority, whoever it is)

    def _release(self) -> None:
        target = self._target()
        if target <= self.committed:
            return
        self.committed = target
        if self.gate.holding:  # readable first, then answered
            self._dispatch(target)
        waiters = self._waiters
        while waiters and waiters[0][0] <= target:
            done = heapq.heappop(waiters)[2]
            answer, done[0] = done[0], None
            if answer is not None:
                answer(Code.OK)

    def _gate_follows(self) -> None:
        self.gate.active = self._started

    def _desired(self) -> set[str]:
        return set(self.in_sync)  # (no in-sync set: a majority, whoever it is)

    def welcome(self, link, hello: dict) -> bool:
        name, first = str(hello.get("name")), self.store.commitlog.min_offset
        offset, why = int(hello.get("offset", 0)), None
        if name not in self._fed():
            why = f"{name} is no member of raft group {self.group}"
        elif offset == 0 and first > 0:
            # an empty member begins its log at the leader's first byte (retention removed
            # what lies before it on the leader: a majority had it, no member needs it)
            hello = dict(hello, offset=first, history=self._history().to_list())
        elif offset < first:
            why = self.behind[name] = (
                f"{name}'s log ends at {offset}, before the leader's first byte {first} "
                "(retention removed what lies between): empty its store (stop it, remove "
                "its data directory) and it is caught up from the leader's first byte")
        if why is not None:
            self.counters["links_refused"] += 1
            link.refuse(wire.json_frame(wire.REFUSE, {"reason": why}))
            return False
        self.behind.pop(name, None)
        return super().welcome(link, hello)

    def start(self, in_sync: frozenset[str] = frozenset()) -> None:
        """Lead from the log's end: answers count from this term's own acks."""
        self.acked.clear()
        self.committed = -1
        self._marks.reset(self.store.commitlog.write_offset)
        self._started = True
        self._gate_follows()
        self._sweeper.cancel()
        self._sweeper.soon()

    def stop(self) -> None:
        """No longer leading: parked sends answer NOT_MASTER; the records the gate holds
        (no majority acknowledged them) leave the readable log, their bytes kept, to be
        shown if the next leader commits them."""
        gate = self.gate
        first = gate.first_held()
        gate.take(None)
        super().stop()
        if first is not None:
            self.store.replica_log().withdraw(first)


class StreamFollower(ReplicaClient):
    def __init__(self, *args, log_end: list[int],
                 on_config: Callable[[int, tuple[str, ...]], None], **kw) -> None:
        """`log_end`: [the end of the last whole record held], shared with the group;
        `on_config(offset, members)`: a configuration, ahead of its record's bytes."""
        super().__init__(*args, **kw)
        self.log_end, self._on_config = log_end, on_config
        self.commit = -1  # what the leader last said a majority holds
        self.welcomed = False
        self.segment_bytes = self.store.commitlog.allocator.size
        self._durable = log_end[0]  # (sync flush: what it holds below this is on disk)

    def _log_end(self) -> int:
        if max(self.replica.received, self.replica.offset) > self.log_end[0]:
            # (part of a record: sent again)
            self.replica.truncate(self.log_end[0])
        return self.log_end[0]

    def _welcomed(self, kind: int, body: bytes) -> None:
        if kind == wire.WELCOME and self.log_end[0] == 0:
            at = int(wire.decode_json(body).get("offset", 0))
            if at > 0:  # empty, fed from the leader's first byte (older ones are gone)
                log.warning("raft group %s: this empty log begins at the leader's first "
                            "byte %d", self.group, at)
                self.replica.begin_at(at)
                self.log_end[0] = self._durable = at
        super()._welcomed(kind, body)
        self.welcomed = True

    def _sync(self, end: int) -> None:
        """fdatasync the segments holding what was received below `end` (the store's
        flush stops at what readers see: these bytes lie past it)."""
        for seg in self.store.commitlog.segments:
            if seg.end_offset > self._durable and seg.start_offset < end:
                seg.flush()
        self._durable = end

    def publish(self, commit: int) -> set[tuple[str, int]]:
        """Show readers what the leader says a majority holds, as far as this log holds
        the leader's bytes; returns the queues that grew."""
        if not self.welcomed or self._stopped:
            return set()
        self.commit = max(self.commit, commit)
        upto = min(self.commit, self.log_end[0])
        if upto <= self.replica.offset:
            return set()
        touched = self.replica.publish(upto, crc=True)
        if touched:
            self._on_records(touched)
        return touched

    def _frames(self, frames: list[tuple[int, bytes]], transport) -> None:
        """DATA and META frames of one read: held, acknowledged once, then published."""
        wrote, commit, known = False, -1, self._known_epoch()
        for kind, body in frames:
            if self._stopped:
                return
            self.frames += 1
            if kind == wire.META:
                self._on_meta(wire.decode_json(body))
                continue
            if kind == wire.CONFIG:
                doc = wire.decode_json(body)
                self._on_config(int(doc["offset"]), tuple(doc["members"]))
                continue
            if kind != wire.DATA:
                raise wire.LinkError(f"unexpected {wire.KIND_NAMES[kind]} from the leader")
            at, end, ms, epoch, said, data = wire.decode_data(body)
            if epoch < known:
                raise wire.LinkError(f"data of term {epoch} after term {known} began: the "
                                     "leader is deposed")
            self.master_end, self.master_ms = end, ms
            commit = max(commit, said)
            if data:
                held = max(self.replica.received, self.replica.offset)
                if at != held:
                    raise wire.LinkError(f"data at {at}, this log holds up to {held}")
                pos = self.replica.hold(at, data)
                if pos == end or pos % self.segment_bytes == 0:  # a record's end
                    self.log_end[0] = pos
                    wrote = True
        if wrote:
            if self._sync_flush:  # on disk before it counts towards a majority
                self._sync(self.log_end[0])
            transport.write(wire.ack_frame(self.log_end[0]))
        if commit >= 0:
            self.publish(commit)
