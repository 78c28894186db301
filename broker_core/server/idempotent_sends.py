"""The send ops' side of idempotence (server.producer_seqs): a flagged SEND or
SEND_MULTI is looked up in the put itself, and a duplicate is answered from its first
try's records, through the same write path (it waits for the promise the first try
waits for)."""

from __future__ import annotations

from collections.abc import Callable

from broker_core.errors import BrokerError
from broker_core.protocol import Code
from broker_core.protocol.delay import PROP_REAL_QID
from broker_core.protocol.idempotence import SendId
from broker_core.server.producer_seqs import DUPLICATE, EXPIRED, ProducerSeqs
from broker_core.store import MessageStore, PutResult, PutStatus


class IdempotentPuts:
    def __init__(self, store: MessageStore, seqs: ProducerSeqs,
                 wall_ms: Callable[[], int]) -> None:
        self.store, self.seqs, self.wall_ms = store, seqs, wall_ms

    def refusal(self, ident: SendId) -> tuple[int, bytes] | None:
        """Why the send is answered before any work, or None: a retry while the table is
        still being read back (NOT_MASTER: a new master, send again in a moment; a first
        try is stored, as no broker can hold it), or a send older than it remembers
        (SEQUENCE_EXPIRED; a floor only rises, so the put need not look again)."""
        seqs = self.seqs
        if not seqs.ready(self.store, self.wall_ms()):
            if ident.first:
                return None
            return Code.NOT_MASTER, (b"this broker is reading back the idempotent sends it "
                                     b"holds (it just became master): send again in a moment")
        if seqs.find(ident.pid, ident.seq) == EXPIRED:
            seqs.expired += 1
            return Code.SEQUENCE_EXPIRED, (
                f"producer {ident.pid:x}: sequence {ident.seq} is older than this broker remembers; "
                "nothing stored now, the first try may have been").encode()
        return None

    def put(self, ident: SendId, sizes: list[int],
            put: Callable[[], PutResult]) -> Callable[[], PutResult]:
        """`put` of the messages of `sizes` (record sizes, in order) unless the first is
        held already: then a PUT_OK result of the first try's records, reason DUPLICATE
        (a SEND_MULTI is stored all or none, so its first message says for all). A
        first try stored while the table is read back is found by that reading (its
        record carries its pair), not added to a table about to be replaced."""
        seqs = self.seqs
        pid, seq = ident.pid, ident.seq

        def run() -> PutResult:
            if seqs.stale and not ident.first:  # (the role changed since `refusal`)
                return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=(
                    "this broker is reading back the idempotent sends it holds"))
            phys = None if seqs.stale else seqs.find(pid, seq)
            if phys is None:
                result = put()
                if result.status is PutStatus.PUT_OK and not seqs.stale:
                    at = result.physical_offset
                    for i, size in enumerate(sizes):
                        seqs.add(pid, seq + i, at)
                        at += size
                return result
            return self._first_try(pid, seq, len(sizes), phys)

        return run

    def _first_try(self, pid: int, seq: int, n: int, phys: int) -> PutResult:
        seqs = self.seqs
        try:
            first = self.store.message_at(phys)
            last, end = first, phys + first.size
            for i in range(1, n):
                at = seqs.find(pid, seq + i)
                if at is None or at < 0:
                    return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=(
                        f"producer {pid:x}: sequence {seq} is held here but {seq + i} "
                        "is not; a SEND_MULTI is retried whole"))
                last = self.store.message_at(at)
                end = at + last.size
        except BrokerError:  # the record is past retention: as good as forgotten
            seqs.expired += 1
            return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=(
                f"producer {pid:x}: sequence {seq} was stored here and is gone (retention)"))
        seqs.duplicates += n
        return PutResult(PutStatus.PUT_OK, phys, first.queue_offset, first.store_timestamp,
                         end, n, DUPLICATE)

    def answered_queue(self, result: PutResult) -> tuple[int, list[int]]:
        """A duplicate's queue (a delayed or half message's real one) and its records'
        sizes, for its answer."""
        # (held: a raft leader answers a committed send before its readers see it)
        first = self.store.message_at(result.physical_offset)
        qid = int(first.properties.get(PROP_REAL_QID, first.queue_id))
        sizes, at = [], result.physical_offset
        while at < result.end_offset:
            size = self.store.message_at(at).size
            sizes.append(size)
            at += size
        return qid, sizes
