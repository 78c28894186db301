"""Idempotent sends on a broker in-process: a retry of a stored SEND or SEND_MULTI is
answered with its first try's offsets and message ids and stored once; what the broker
holds is read back from its CommitLog after a restart or a promotion, and a first try
is stored while it is; a retry older than it remembers is refused, nothing stored."""

from __future__ import annotations

import asyncio
import shutil
import threading

import pytest

from broker_core import protocol as p
from broker_core.protocol import Code, Op
from broker_core.protocol.idempotence import SendId, with_id
from broker_core.protocol.multi import decode_multi_answer, encode_message, encode_multi
from broker_core.protocol.record import HEADER_SIZE
from broker_core.server.broker import Broker, BrokerConfig
from broker_core.server.producer_seqs import WINDOW_S
from broker_core.store import PutStatus
from tests.clock import ManualClock

pytestmark = pytest.mark.timeout(30)
PID = 0x5EED


def make(path, clock):
    b = Broker(BrokerConfig("b1", path, segment_bytes=8 << 20), clock=clock)
    b.topics.get("orders", create=True)
    return b


@pytest.fixture
def clock():
    return ManualClock(1_794_355_200.0)


def call(broker, op, body, seq=None, first=False):
    flags = 0 if seq is None else p.FLAG_IDEMPOTENT | (p.FLAG_FIRST_TRY if first else 0)
    if seq is not None:
        body = with_id(PID, seq, body)
    header = p.Header(op=op, flags=flags, code=0, request_id=1, length=len(body))
    return asyncio.run(broker.handle(header, body))


def send(broker, body: bytes, seq: int | None, qid: int = -1, first=False):
    code, answer = call(broker, Op.SEND, p.encode_send("orders", qid, p.OutMessage(body)),
                        seq, first)
    return code, (p.decode_send_answer(answer)[:4] if code == Code.OK else answer)


def multi(broker, bodies, seq):
    body = encode_multi("orders", 2, [encode_message(p.OutMessage(b)) for b in bodies])
    code, answer = call(broker, Op.SEND_MULTI, body, seq)
    return code, (decode_multi_answer(answer)[:2] + (decode_multi_answer(answer)[4],)
                  if code == Code.OK else answer)


def stored(broker, qid):
    return broker.store.queue_offsets("orders", qid)[1]


def test_a_retried_send_is_answered_as_its_first_try_and_stored_once(tmp_path, clock):
    b = make(tmp_path / "b1", clock)
    try:
        code, first = send(b, b"paid", seq=0, qid=1)
        assert code == Code.OK
        assert send(b, b"paid", seq=0, qid=1) == (Code.OK, first)
        assert send(b, b"paid", seq=0, qid=-1) == (Code.OK, first)  # (the queue it took)
        assert send(b, b"next", seq=1, qid=1)[1][1] == 1  # a new sequence is stored
        assert send(b, b"plain", seq=None, qid=1)[1][1] == 2  # and so is a send without one
        assert send(b, b"plain", seq=None, qid=1)[1][1] == 3  # (at least once: twice)
        assert stored(b, 1) == 4
        code, body = call(b, Op.STATS, b"")
        seqs = p.decode_json(body)["idempotence"]  # what /stats and /metrics show
        assert (seqs["duplicates"], seqs["producers"], seqs["expired"]) == (2, 1, 0)
    finally:
        b.close()


def test_a_retried_multi_is_answered_whole_and_a_partial_overlap_refused(tmp_path, clock):
    b = make(tmp_path / "b1", clock)
    try:
        code, first = multi(b, [b"a", b"bb", b"ccc"], seq=10)
        assert code == Code.OK and first[:2] == (2, 0)
        assert multi(b, [b"a", b"bb", b"ccc"], seq=10) == (Code.OK, first)
        code, why = multi(b, [b"x", b"y"], seq=12)  # 12 held, 13 not: not a retry of one
        assert code == Code.MESSAGE_ILLEGAL and b"retried whole" in why
        assert stored(b, 2) == 3
    finally:
        b.close()


def test_what_a_broker_holds_is_read_back_after_a_restart_and_a_promotion(tmp_path, clock):
    b = make(tmp_path / "b1", clock)
    _code, first = send(b, b"before", seq=7, qid=0)
    b.close()
    clock.advance(5)
    b = make(tmp_path / "b1", clock)  # restarted: its table is read from the CommitLog
    try:
        assert send(b, b"before", seq=7, qid=0) == (Code.OK, first)
        assert b.sends.idempotent.seqs.rebuilt["sends"] == 1
        send(b, b"after", seq=8, qid=0)
        b.role_changed()  # became master: read again, both found
        assert send(b, b"after", seq=8, qid=0)[1][1] == 1
        assert b.sends.idempotent.seqs.rebuilt["sends"] == 2
        assert stored(b, 0) == 2
    finally:
        b.close()


def test_a_retry_older_than_remembered_is_refused_and_nothing_stored(tmp_path, clock):
    b = make(tmp_path / "b1", clock)
    try:
        assert send(b, b"old", seq=3, qid=0)[0] == Code.OK
        clock.advance(WINDOW_S + 1)
        assert send(b, b"new", seq=600, qid=0)[0] == Code.OK  # a new block sweeps the old
        code, why = send(b, b"old", seq=3, qid=0)
        assert code == Code.SEQUENCE_EXPIRED and b"may have been" in why
        code, _why = multi(b, [b"o1", b"o2"], seq=4)
        assert code == Code.SEQUENCE_EXPIRED
        assert stored(b, 0) == 2 and stored(b, 2) == 0
        assert b.sends.idempotent.seqs.figures()["expired"] == 2
    finally:
        b.close()


def test_a_flag_on_an_op_that_cannot_carry_it_is_a_bad_request(tmp_path, clock):
    b = make(tmp_path / "b1", clock)
    try:
        code, why = call(b, Op.SEND_BATCH, b"", seq=1)
        assert code == Code.BAD_REQUEST and b"only SEND and SEND_MULTI" in why
        header = p.Header(op=Op.SEND, flags=p.FLAG_IDEMPOTENT, code=0, request_id=1,
                          length=3)
        code, why = asyncio.run(b.handle(header, b"abc"))
        assert code == Code.BAD_REQUEST and b"no producer id" in why
    finally:
        b.close()


def test_the_table_keeps_at_most_its_blocks_and_forgets_the_oldest_first():
    from broker_core.server.producer_seqs import BLOCK, EXPIRED, ProducerSeqs

    clock = ManualClock(0.0)
    seqs = ProducerSeqs(clock, window_s=60, max_blocks=2)
    seqs.add(1, 0, 100)
    clock.advance(1)
    seqs.add(2, 0, 200)
    clock.advance(1)
    seqs.add(1, 5, 105)  # producer 1's block touched again: producer 2's is the oldest
    seqs.add(1, BLOCK, 900)  # a third block: one must go
    assert seqs.find(2, 0) == EXPIRED and seqs.find(2, 1) == EXPIRED  # below its floor
    assert (seqs.find(1, 0), seqs.find(1, 5), seqs.find(1, BLOCK)) == (100, 105, 900)
    assert seqs.find(1, 1) is None and seqs.find(3, 0) is None  # never stored: not held
    assert seqs.figures()["blocks"] == 2


def test_a_new_master_with_much_to_read_back_reads_it_in_a_thread_and_serves_meanwhile(
        tmp_path, clock, monkeypatch):
    from broker_core.server import producer_seqs

    b = make(tmp_path / "b1", clock)
    try:
        _code, first = send(b, b"held", seq=5, qid=0)
        monkeypatch.setattr(producer_seqs, "READ_INLINE_BYTES", 0)  # everything "much"
        b.role_changed()  # became master
        code, why = send(b, b"held", seq=5, qid=0)
        assert code == Code.NOT_MASTER and b"reading back" in why  # the producer comes again
        assert send(b, b"plain", seq=None, qid=0)[0] == Code.OK  # the rest served meanwhile
        b.sends.idempotent.seqs.join(10)
        assert send(b, b"held", seq=5, qid=0) == (Code.OK, first)  # adopted: known
        assert stored(b, 0) == 2
    finally:
        b.close()


def test_a_torn_tail_is_cut_and_only_what_survived_is_remembered(tmp_path, clock):
    """A crash image (the files as a SIGKILL leaves them) whose last record is torn:
    recovery cuts it, the table read back holds the two before it, and the torn send,
    retried, is stored once."""
    b = make(tmp_path / "b1", clock)
    try:
        firsts = [send(b, b"paid-%d" % i, seq=i, qid=0)[1] for i in range(3)]
        torn = b.store.queue_unit("orders", 0, 2)
        shutil.copytree(tmp_path / "b1", tmp_path / "crash")  # its abort file with it
    finally:
        b.close()
    (segment,) = sorted((tmp_path / "crash").rglob("commitlog/*"))[:1]
    with open(segment, "r+b") as f:  # the record's body never reached the disk
        f.seek(torn + HEADER_SIZE)
        f.write(b"\x00" * 6)
    b = make(tmp_path / "crash", clock)
    try:
        assert stored(b, 0) == 2  # cut at the torn record
        assert b.sends.idempotent.seqs.rebuilt["sends"] == 2
        assert send(b, b"paid-0", seq=0, qid=0) == (Code.OK, firsts[0])  # remembered
        code, again = send(b, b"paid-2", seq=2, qid=0)  # not: stored now, once
        assert code == Code.OK and again[1] == 2
        assert send(b, b"paid-2", seq=2, qid=0) == (Code.OK, again)
        assert stored(b, 0) == 3
    finally:
        b.close()


def test_a_new_master_reading_back_stores_first_tries_and_knows_them_once_adopted(
        tmp_path, clock, monkeypatch):
    """A promoted slave read back two minutes of CommitLog in a worker, refusing every
    idempotent send meanwhile (1,697 refusals in one failover of `make demo`). A first
    try cannot be held: it is stored at once; a retry waits for the table, and a retry
    of a first try stored meanwhile is known once the table is adopted."""
    from broker_core.server import producer_seqs

    b = make(tmp_path / "b1", clock)
    try:
        _code, held = send(b, b"held", seq=5, qid=0, first=True)
        monkeypatch.setattr(producer_seqs, "READ_INLINE_BYTES", 0)  # everything "much"
        gate = threading.Event()
        values = producer_seqs.property_values

        def slow_values(*args):  # (the worker's end of the log is taken before it reads)
            if threading.current_thread().name == "floodgate-producer-seqs":
                gate.wait(10)  # the worker reads while the master serves
            yield from values(*args)

        monkeypatch.setattr(producer_seqs, "property_values", slow_values)
        b.role_changed()  # became master
        code, why = send(b, b"held", seq=5, qid=0)
        assert code == Code.NOT_MASTER and b"reading back" in why  # a retry waits
        code, meanwhile = send(b, b"new", seq=6, qid=0, first=True)
        assert code == Code.OK  # a first try is stored at once
        gate.set()
        b.sends.idempotent.seqs.join(10)
        assert send(b, b"held", seq=5, qid=0) == (Code.OK, held)  # read by the worker
        assert send(b, b"new", seq=6, qid=0) == (Code.OK, meanwhile)  # read at adoption
        assert stored(b, 0) == 2
    finally:
        b.close()


def test_a_retry_whose_put_runs_after_the_role_changed_stores_nothing(tmp_path, clock):
    """A put can run after its check (a drill fault or sync flush queues it); a role
    change meanwhile leaves the table to be read back: a retry then stores nothing (its
    first try may be held), where a look at the stale table could store it twice."""
    b = make(tmp_path / "b1", clock)
    try:
        send(b, b"held", seq=5, qid=0, first=True)
        put = b.sends.idempotent.put(SendId(PID, 5), [100],
                                     lambda: pytest.fail("a retry stored on a stale table"))
        b.role_changed()
        result = put()
        assert result.status is PutStatus.SERVICE_NOT_AVAILABLE and "reading back" in result.reason
        assert stored(b, 0) == 1
    finally:
        b.close()
