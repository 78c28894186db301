"""Half messages pending, resolved and checked back (RocketMQ's
TransactionalMessageService and its check service).

The pending set is never a file of its own: it is what the half queue holds
that the op queue does not resolve (protocol.transactions). The service reads
both queues forward from watermarks — the oldest half still pending, and the op
queue offset before which no op of a half at or past it lies — which `TxTable`
keeps (saved by the tick, sent to slaves with the other tables, with each
pending half's check count), so a restart or a promoted slave rebuilds the set
by reading only what came after them.

A transaction is one or more halves (a transform's output) settled by one op
record, which may carry the consumer group's offsets the transaction read: the op
is the commit, written before the halves' copies into their real queues, and a
commit cut short by a crash is finished when the op is read back
(server.tx_commits). A resolved half is remembered, so a second commit of it (the
producer's own, after a check-back's) delivers nothing.

Check-backs: a half unresolved for `check_after_s` is handed to a producer of
its group when one asks (CHECK_TRANSACTION: the producer polls, as our
connections carry requests one way), then every `interval_s`, at most
`max_checks` times; a check due with no producer of the group asking counts as
made. After the last one, the half is rolled back ("checks-exhausted").
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable

from broker_core import protocol as p
from broker_core.protocol.delay import PROP_REAL_QID, PROP_REAL_TOPIC
from broker_core.protocol.record import pack_host
from broker_core.protocol.transactions import (
    CHECK_AFTER_S,
    CHECK_INTERVAL_S,
    HALF_TOPIC,
    MAX_CHECKS,
    MISSED_ASKS,
    OP_TOPIC,
    PRODUCER_ALIVE_S,
    PROP_CONSUMED_FROM,
    Consumed,
    TxOp,
    TxState,
    op_body,
    parse_op,
)
from broker_core.server.group_state import OffsetTable
from broker_core.server.queue_locks import QueueLocks
from broker_core.server.tx_commits import apply_offsets, copies_after, fence_reason
from broker_core.server.tx_table import Half, TxTable
from broker_core.store import MessageStore, PutResult, PutStatus

log = logging.getLogger("floodgate.broker")

READ_BATCH = 256
RECENT = 4096  # resolved halves past the watermark whose outcome is still named


class TxService:
    """`put(topic, qid, message) -> PutResult`: store a committed half in its real
    queue. `wall_ms`: the clock halves' ages are read against."""

    def __init__(self, store: MessageStore, table: TxTable,
                 put: Callable[[str, int, object], PutResult | None],
                 wall_ms: Callable[[], int], check_after_s: float = CHECK_AFTER_S,
                 interval_s: float = CHECK_INTERVAL_S, offsets: OffsetTable | None = None,
                 locks: QueueLocks | None = None, max_checks: int = MAX_CHECKS) -> None:
        self.store, self.table, self.put, self.wall_ms = store, table, put, wall_ms
        self.offsets, self.locks = offsets, locks  # what commits with consumed offsets need
        self._host = pack_host(store.config.store_host)  # in the ids of what it stores
        self.check_after_ms = int(check_after_s * 1000)
        self.interval_ms = int(interval_s * 1000)
        self.max_checks = max_checks
        self.loaded = False
        self.pending: dict[int, Half] = {}
        self.resolved: dict[int, tuple[int, TxState]] = {}  # half -> (its op's offset, how)
        # how the last RECENT halves past the watermark went: an operator's second resolve
        # of a half hears "committed already", not just "resolved", whenever the watermark moved
        self.recent: OrderedDict[int, TxState] = OrderedDict()
        self.resolving: set[int] = set()  # an END_TRANSACTION of it is being written
        self._half_read = self._op_read = 0
        self.producers: dict[str, int] = {}  # producer group -> alive until (ms): its ask's
        # time and PRODUCER_ALIVE_S, or MISSED_ASKS of its polls
        self.counters = {"halves_total": 0, "committed_total": 0, "checks_total": 0,
                         "duplicate_ends_total": 0, "fenced_total": 0,
                         "offsets_committed_total": 0, "finished_on_recovery_total": 0}
        self.rolled_back: dict[str, int] = {}  # by whom -> how many
        # consumer groups whose offsets move with transactions (client.transform): the
        # console marks them exactly once; group -> such commits since this broker started
        self.transform_groups: dict[str, int] = {}

    # -- reading the two queues forward ---------------------------------------------------
    def unload(self) -> None:
        """Not a master any more: the pending set is rebuilt when it is again."""
        self.loaded = False
        self.pending.clear()
        self.resolved.clear()
        self.recent.clear()
        self.resolving.clear()

    def catch_up(self) -> None:
        if not self.loaded:
            self._half_read, self._op_read = self.table.half, self.table.op
            self.loaded = True
        hlo, hhi = self.store.queue_offsets(HALF_TOPIC, 0)
        self._half_read = max(self._half_read, hlo)
        while self._half_read < hhi:
            got = self.store.get(HALF_TOPIC, 0, self._half_read, READ_BATCH)
            if not got.messages:  # a gap (retention, a record cut): past it
                self._half_read = max(self._half_read + 1, got.next_offset)
                continue
            for m in got.messages:
                if m.queue_offset not in self.resolved and m.queue_offset not in self.pending:
                    self.counters["halves_total"] += 1
                    props = m.properties or {}
                    self.pending[m.queue_offset] = Half(
                        m.queue_offset, props.get(p.PRODUCER_GROUP, ""),
                        props.get(PROP_REAL_TOPIC, ""), m.store_timestamp, m.msg_id,
                        self.table.checks.get(m.queue_offset, 0),
                        made_from=props.get(PROP_CONSUMED_FROM, ""))
            self._half_read = max(self._half_read, got.next_offset)
        olo, ohi = self.store.queue_offsets(OP_TOPIC, 0)
        self._op_read = max(self._op_read, olo)
        unfinished: list[tuple[int, int, TxOp]] = []  # commits another life wrote
        while self._op_read < ohi:
            got = self.store.get(OP_TOPIC, 0, self._op_read, READ_BATCH)
            if not got.messages:
                self._op_read = max(self._op_read + 1, got.next_offset)
                continue
            for m in got.messages:
                op = parse_op(m.body)
                if op is None:
                    continue
                for half in op.halves:
                    self._resolved(half, m.queue_offset, op.decision)
                if op.decision is TxState.COMMIT and m.queue_offset >= self.table.done:
                    unfinished.append((m.queue_offset, m.store_timestamp, op))
            self._op_read = max(self._op_read, got.next_offset)
        if unfinished:
            self._finish_read_back(unfinished)

    def stored_half(self, result: PutResult, group: str, topic: str, made_from: str) -> None:
        """A half just stored on this master: pending now, without reading it back (a
        transform's commit rate paid 8 % of the broker's CPU for that). Only the next
        one in line: anything else is read back as usual."""
        if not self.loaded or result.queue_offset != self._half_read:
            return
        self.counters["halves_total"] += 1
        msg_id = (self._host + result.physical_offset.to_bytes(8, "big")).hex().upper()
        self.pending[result.queue_offset] = Half(result.queue_offset, group, topic,
                                                 result.store_timestamp, msg_id,
                                                 made_from=made_from)
        self._half_read += 1

    def _resolved(self, half: int, op_offset: int, decision: TxState) -> None:
        if half < self.table.half:
            return
        self.resolved[half] = (op_offset, decision)
        self.pending.pop(half, None)
        self.table.checks.pop(half, None)

    def advance(self) -> None:
        """Move the watermarks past what is resolved (resolved entries below dropped)."""
        half = min(self.pending, default=self._half_read)
        drop = [h for h in self.resolved if h < half]
        for h in drop:
            self.recent[h] = self.resolved.pop(h)[1]
        while len(self.recent) > RECENT:
            self.recent.popitem(last=False)
        op = min((o for o, _d in self.resolved.values()), default=self._op_read)
        if (half, op) != (self.table.half, self.table.op):
            self.table.half, self.table.op = half, op
            self.table.dirty = True

    # -- END_TRANSACTION ----------------------------------------------------------------------
    def state_of(self, offset: int, caught_up: bool = False) -> str:
        """pending, committed, rolled-back, resolving, resolved (before the watermark:
        how is forgotten) or unknown (no half there). `caught_up`: the caller read the
        queues forward just now (a transaction's 64 halves asked about in a row)."""
        if not caught_up:
            self.catch_up()
        if offset in self.resolving:
            return "resolving"
        if offset in self.pending:
            return "pending"
        how = self.resolved[offset][1] if offset in self.resolved else self.recent.get(offset)
        if how is not None:
            return "committed" if how is TxState.COMMIT else "rolled-back"
        if offset < self.table.half and offset >= self.store.queue_offsets(HALF_TOPIC, 0)[0]:
            return "resolved"
        return "unknown"

    def fence(self, consumed: Consumed) -> str | None:
        """Why a commit carrying `consumed` must be refused now, or None."""
        if self.offsets is None or self.locks is None:
            return "this broker commits no consumer offsets in transactions"
        return fence_reason(consumed, self.offsets, self.locks, self.store)

    def end(self, halves: list[int], decision: TxState, by: str,
            consumed: Consumed | None = None) -> PutResult:
        """Write the outcome of pending halves (the caller checked `state_of`): the op
        record, then on commit the messages in their real queues and `consumed`'s
        offsets. The op's PutResult, its end past the last copy; or the failed put's."""
        halves = list(halves)
        messages = {}
        if decision is TxState.COMMIT:
            messages = self._half_messages(halves)
            if missing := [h for h in halves if h not in messages]:
                return PutResult(PutStatus.SERVICE_NOT_AVAILABLE,
                                 reason=f"half message {missing[0]} not readable")
        op = TxOp(decision, tuple(halves), by, consumed)
        result = self.store.put(OP_TOPIC, 0, op_body(decision, halves, by, consumed),
                                wait=False)
        if result.status is not PutStatus.PUT_OK:
            return result
        for offset in halves:
            self._resolved(offset, result.queue_offset, decision)
        self._op_read = max(self._op_read, result.queue_offset + 1)
        if decision is TxState.ROLLBACK:
            self.rolled_back[by] = self.rolled_back.get(by, 0) + len(halves)
            return result
        self.counters["committed_total"] += len(halves)
        end = self._finish(op, result.store_timestamp, set(), messages)
        if end is None:  # a copy not written (a full disk): finished when read back
            log.error("commit at op %d: a copy could not be written; finished when the op is "
                      "read back", result.queue_offset)
            return result
        self.table.done = max(self.table.done, result.queue_offset + 1)
        self.table.dirty = True
        return result._replace(end_offset=max(end, result.end_offset))

    def _half_messages(self, offsets: list[int]) -> dict:
        """The half messages at `offsets` that can be read: one read of the stretch
        they lie in when they lie close (a transform's are one after another)."""
        if not offsets:
            return {}
        want, lo, hi = set(offsets), min(offsets), max(offsets)
        out = {}
        if hi - lo < 2 * len(want) + 8:
            got = self.store.get(HALF_TOPIC, 0, lo, hi - lo + 1)
            out = {m.queue_offset: m for m in got.messages if m.queue_offset in want}
        for offset in want - out.keys():
            got = self.store.get(HALF_TOPIC, 0, offset, 1)
            if got.messages and got.messages[0].queue_offset == offset:
                out[offset] = got.messages[0]
        return out

    def _finish(self, op: TxOp, op_ms: int, present: set[str],
                messages: dict | None = None) -> int | None:
        """Copy a commit's halves not in `present` into their real queues and move its
        offsets: the end offset of the last copy (-1: none written), None when a copy
        failed. `messages`: the halves, read already."""
        end = -1
        if messages is None:
            messages = self._half_messages(list(op.halves))
        for offset in op.halves:
            m = messages.get(offset)
            if m is None:
                log.error("committed half %d is not readable: not delivered", offset)
                continue
            if m.msg_id in present:
                continue
            props = m.properties or {}
            try:
                qid = int(props.get(PROP_REAL_QID, "0"))
            except ValueError:
                qid = 0
            put = self.put(props.get(PROP_REAL_TOPIC, ""), qid, m)
            if put is None:  # its topic was deleted meanwhile
                log.warning("committed half %d: topic %r takes no messages", offset,
                            props.get(PROP_REAL_TOPIC))
            elif put.status is not PutStatus.PUT_OK:
                return None
            else:
                end = put.end_offset
        if op.consumed is not None and self.offsets is not None:
            apply_offsets(op.consumed, self.offsets, op_ms)
            self.counters["offsets_committed_total"] += 1
            group = op.consumed.group
            self.transform_groups[group] = self.transform_groups.get(group, 0) + 1
        return end

    def _finish_read_back(self, unfinished: list[tuple[int, int, TxOp]]) -> None:
        """Commits read back past `done` (a restart, a promotion): the copies a crash cut
        short written, the offsets moved. Every later op is finished once this is."""
        present = copies_after(self.store, self.store.queue_unit(OP_TOPIC, 0, unfinished[0][0]))
        for op_offset, op_ms, op in unfinished:
            end = self._finish(op, op_ms, present)
            if end is None:
                return  # tried again at the next read back
            if end >= 0:
                self.counters["finished_on_recovery_total"] += 1
            self.table.done = op_offset + 1
            self.table.dirty = True

    # -- check-backs ----------------------------------------------------------------------------
    def due(self, now_ms: int) -> list[Half]:
        return [h for h in self.pending.values() if h.offset not in self.resolving
                and now_ms - h.stored_ms >= self.check_after_ms and now_ms >= h.next_check_ms]

    def next_due_ms(self) -> int | None:
        """When `run_once` next has something to do (wall ms), None if nothing is pending:
        a half falls due a check, or one that is due (its producer group asks for its
        checks itself) outlives its group's last sign of life."""
        now = self.wall_ms()
        soonest = None
        for h in self.pending.values():
            if h.offset in self.resolving:
                continue
            due = max(h.stored_ms + self.check_after_ms, h.next_check_ms)
            if due <= now:  # due: counted once its producers are gone
                due = max(now, self.producers.get(h.group, -10**12) + 1)
            if soonest is None or due < soonest:
                soonest = due
        return soonest

    def checks_for(self, group: str, poll_s: float | None = None) -> list[Half]:
        """A producer of `group` asks (every `poll_s`, if it says): the halves it should
        check now (counted)."""
        self.catch_up()
        now = self.wall_ms()
        alive_s = max(PRODUCER_ALIVE_S, MISSED_ASKS * (poll_s or 0.0))
        self.producers[group] = max(self.producers.get(group, 0), now + int(alive_s * 1000))
        out = [h for h in self.due(now) if h.group == group and h.checks < self.max_checks]
        for h in out:
            self._checked(h, now)
        return out

    def _checked(self, h: Half, now: int) -> None:
        h.checks += 1
        h.next_check_ms = now + self.interval_ms
        self.table.checks[h.offset] = h.checks
        self.table.dirty = True
        self.counters["checks_total"] += 1

    def run_once(self) -> list[int]:
        """Count the checks no producer asked for and give up on halves past their last
        check; the offsets to roll back now. Watermarks advanced."""
        self.catch_up()
        now = self.wall_ms()
        give_up = []
        for h in self.due(now):
            if h.checks >= self.max_checks:
                give_up.append(h.offset)
            elif now > self.producers.get(h.group, -10**12):
                self._checked(h, now)  # nobody of its group to ask: the check is spent
        self.advance()
        return give_up

    def listing(self, group: str | None = None) -> list[dict]:
        self.catch_up()
        now = self.wall_ms()
        return [{"offset": h.offset, "group": h.group, "topic": h.topic, "msg_id": h.msg_id,
                 "age_s": round((now - h.stored_ms) / 1000, 1), "checks": h.checks,
                 "next_check_s": round(max(0, max(h.next_check_ms, h.stored_ms +
                                                  self.check_after_ms) - now) / 1000, 1),
                 "producer_alive": now <= self.producers.get(h.group, -10**12),
                 "made_from": h.made_from}
                for h in sorted(self.pending.values(), key=lambda h: h.offset)
                if group is None or h.group == group]

    def figures(self) -> dict:
        now = self.wall_ms()
        oldest = min((h.stored_ms for h in self.pending.values()), default=None)
        return {"pending": len(self.pending),
                "oldest_pending_s": 0.0 if oldest is None else round((now - oldest) / 1000, 1),
                "rolled_back": dict(self.rolled_back),
                "transform_groups": dict(self.transform_groups), **self.counters}
