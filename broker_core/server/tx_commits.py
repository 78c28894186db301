"""A transaction's commit as one record: consume-transform-produce exactly once within
one broker group (Kafka's sendOffsetsToTransaction, KIP-98 and KIP-447, on RocketMQ's
half messages).

A transform reads a queue of its input topic under the queue's lock, sends its
output as half messages to the same broker group, and commits them with the offsets
it read (protocol.transactions.Consumed). The broker then, in one step of its loop:

1. fences the commit (`fence_reason`): the transform must still hold the queue's lock
   under the epoch it read with, the group's offset must still be where it began
   reading, and the last message it read must be the one the queue holds there. A
   zombie whose queue moved (a rebalance, a lease run out, a failover), whose range
   another holder committed, or that read an old master's tail a failover cut (its
   offsets now hold other messages) is refused, its halves rolled back;
2. writes ONE op record naming every half and the offsets: that record is the
   commit. Before it, nothing of the transaction is visible; after it, everything is;
3. copies each half into its real queue and moves the group's offsets forward.

A broker killed between 2 and 3, or a slave promoted whose log ends between them,
finishes 3 when it reads the op back (`missing_copies`, then the same copies and
offsets): TxTable's `done` is the op offset before which every commit was finished,
saved with the offsets table (after it, in the same write), so only the commits of
the last moments are looked at again.
"""

from __future__ import annotations

from broker_core.protocol.system_topics import PROP_COPY_OF
from broker_core.protocol.transactions import Consumed, fingerprint
from broker_core.server.group_state import OffsetTable
from broker_core.server.queue_locks import QueueLocks
from broker_core.store import MessageStore
from broker_core.store.property_scan import property_values


def fence_reason(consumed: Consumed, offsets: OffsetTable, locks: QueueLocks,
                 store: MessageStore) -> str | None:
    """Why a commit of `consumed` must be refused now, or None."""
    g, t, client = consumed.group, consumed.topic, consumed.client_id
    for qid, (begin, end, epoch, last) in sorted(consumed.queues.items()):
        if not locks.holds(g, client, t, qid, epoch):
            return (f"{client} no longer holds {t}:{qid} for {g} under lock epoch {epoch} "
                    f"(rebalanced, its lease ran out, or the master changed)")
        committed = offsets.get(g, t, qid)
        if committed >= 0 and committed != begin:
            return (f"{client} read {t}:{qid} from {begin}, but {g}'s offset there is "
                    f"{committed} now (another holder committed meanwhile)")
        if end > store.queue_offsets(t, qid)[1]:
            return f"{t}:{qid} ends before {end}: offsets past the queue's end"
        if end > begin:
            got = store.get(t, qid, end - 1, 1).messages
            if not got or got[0].queue_offset != end - 1 or fingerprint(got[0]) != last:
                return (f"{t}:{qid}:{end - 1} is not the message {client} read there (a "
                        f"failover cut the old master's tail and wrote others over it)")
    return None


def apply_offsets(consumed: Consumed, offsets: OffsetTable, op_ms: int) -> None:
    """Move the group's offsets to past what the transaction read; never back (a commit
    finished late must not undo a later one), and not at all over an operator's reset
    made after the commit."""
    if offsets.resets.get(consumed.group, 0) > op_ms:
        return
    for qid, (_begin, end, _epoch, _last) in consumed.queues.items():
        offsets.advance(consumed.group, consumed.topic, qid, end)


def copies_after(store: MessageStore, phys: int) -> set[str]:
    """The halves copied into their real queues at or after `phys` (their message ids),
    read from the CommitLog's tail: what a commit cut short did write."""
    cl = store.commitlog
    return {v for _pos, v in property_values(cl, phys, cl.write_offset, PROP_COPY_OF) if v}
