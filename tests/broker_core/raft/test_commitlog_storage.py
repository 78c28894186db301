"""The CommitLog as the Raft log, on real files: entries are records placed where the
log ends (a blank closes a segment they do not fit); readers see committed entries
only; a follower's uncommitted tail is cut, never a committed one; bytes a follower
is sent are verified before they are written; and after a restart whatever a crash
left (an entry's bytes without its slot, a slot without all its bytes, records not
known committed) is made consistent again."""

from __future__ import annotations

import pytest

from broker_core.errors import StoreCorruptError
from broker_core.raft.appender import RaftAppender
from broker_core.raft.entry_index import HEADER, SLOT
from broker_core.raft.messages import Entry
from broker_core.store import MessageStore
from tests.broker_core.raft.disk import (
    HOST,
    SEGMENT,
    TOPIC,
    bodies,
    close,
    config,
    entry,
    open_storage,
    reopen,
)


def fill(storage, n: int, term: int = 1, size: int = 3000) -> list[bytes]:
    """`n` entries of two records each; returns the bodies in order."""
    out = []
    for _ in range(n):
        i = storage.last_index() + 1
        pair = [f"{i}a".encode().ljust(size, b"."), f"{i}b".encode().ljust(size, b".")]
        storage.append([Entry(term, i, entry(storage, pair))])
        out += pair
    return out


def test_entries_come_back_byte_for_byte_and_cross_segments_with_a_blank(tmp_path):
    s = open_storage(tmp_path)
    sent = fill(s, 30)  # 30 x ~6 KB over 64 KiB segments: several rolls
    assert s.last_index() == 30 and s.end_offset() > 2 * SEGMENT
    assert len(s.commitlog.segments) >= 3
    follower = open_storage(tmp_path / "f")
    follower.append(s.entries(1, 30))  # a follower writes the leader's bytes as they are
    assert [e.data for e in follower.entries(1, 30)] == [e.data for e in s.entries(1, 30)]
    for st in (s, follower):
        assert bodies(st) == []  # nothing committed: nothing to read
        st.publish(30)
        assert bodies(st) == sent
    close(s)
    close(follower)


def test_readers_see_only_committed_entries_and_a_publish_never_goes_back(tmp_path):
    s = open_storage(tmp_path)
    sent = fill(s, 5)
    assert s.publish(2) == {("orders", 0)}
    assert bodies(s) == sent[:4]
    assert s.publish(1) == set()  # committed stays committed
    assert bodies(s) == sent[:4]
    close(s)


def test_an_uncommitted_tail_is_cut_and_a_committed_one_refused(tmp_path):
    s = open_storage(tmp_path)
    sent = fill(s, 6)
    s.publish(3)
    s.truncate(5)  # a new leader never had 5 and 6
    assert s.last_index() == 4 and s.term_at(4) == 1 and s.term_at(5) == 0
    sent = sent[:8] + fill(s, 1, term=2)  # its entry 5 takes the place
    with pytest.raises(StoreCorruptError, match="below what is committed"):
        s.truncate(3)
    s.publish(5)
    assert bodies(s) == sent
    s = reopen(s)
    assert (s.last_index(), s.term_at(5)) == (5, 2)
    close(s)


def test_a_follower_refuses_bytes_that_do_not_verify_and_writes_nothing(tmp_path):
    leader, follower = open_storage(tmp_path / "l"), open_storage(tmp_path / "f")
    fill(leader, 2)
    good = leader.entries(1, 2)
    follower.append(good[:1])
    torn = bytearray(good[1].data)
    torn[120] ^= 0xFF  # a flipped byte in a body: its CRC
    with pytest.raises(StoreCorruptError, match="does not verify"):
        follower.append([Entry(1, 2, bytes(torn))])
    misplaced = Entry(1, 2, good[0].data)  # entry 1's records at entry 2's place
    with pytest.raises(StoreCorruptError, match="physical offset"):
        follower.append([misplaced])
    assert follower.last_index() == 1
    follower.append(good[1:])
    assert follower.entries(2, 2) == good[1:]
    close(leader)
    close(follower)


def test_term_and_vote_survive_a_restart(tmp_path):
    s = open_storage(tmp_path, sync=True)
    s.save_vote(7, "n2")
    fill(s, 1, term=7)
    s = reopen(s)
    assert (s.term, s.voted_for, s.term_at(1)) == (7, "n2", 7)
    close(s)


def test_on_restart_records_not_known_committed_are_withdrawn_then_published_again(tmp_path):
    s = open_storage(tmp_path, save_every_s=3600)  # the published mark saved on close only
    sent = fill(s, 4)
    s.publish(2)
    s.save_published()  # the mark: entries 1-2
    s.publish(3)  # committed meanwhile, the mark not saved again: a crash here
    mark = s.commitlog.write_offset
    s.store.close()  # as a crash leaves it: the mark at 2, the log holding 4
    s.index.close()
    s = open_storage(tmp_path)
    assert s.last_index() == 4 and bodies(s) == sent[:4]  # 3 not known committed
    assert s.cut_on_start["units_withdrawn"] == 4 and mark > s.commitlog.write_offset
    s.publish(4)  # the leader says 4 is committed
    assert bodies(s) == sent
    close(s)


def test_bytes_no_slot_names_are_cut_on_restart(tmp_path):
    s = open_storage(tmp_path)
    sent = fill(s, 3)
    s.publish(3)
    s.commitlog.write_at(s.end_offset(), entry(s, [b"never indexed"]))  # a crash before its slot
    path = tmp_path
    close(s)
    s = open_storage(path)
    assert s.cut_on_start["bytes_cut"] > 0 and s.last_index() == 3
    assert bodies(s) == sent
    fill(s, 1)  # and the next entry goes where the cut bytes were
    s.publish(4)
    assert len(bodies(s)) == len(sent) + 2
    close(s)


def test_a_slot_without_all_its_bytes_or_torn_is_dropped_on_restart(tmp_path):
    s = open_storage(tmp_path)
    fill(s, 3)
    s.publish(2)
    start, end = s.index.end_of(2), s.index.end_of(3)
    seg = s.commitlog.segment_for(end - 1)
    local = end - 1 - seg.start_offset
    seg.mm[local - 50:local + 1] = bytes(51)  # entry 3's last record never reached the disk
    with open(s.index.path, "ab") as f:
        f.write(b"\x01" * (SLOT.size - 3))  # and a slot torn after it
    close(s)
    s = open_storage(tmp_path)
    assert s.last_index() == 2 and s.end_offset() == start
    assert s.cut_on_start["entries_dropped"] == 2
    assert s.index.path.stat().st_size == HEADER.size + 2 * SLOT.size
    close(s)


def test_a_store_with_records_from_before_raft_keeps_them_as_its_base(tmp_path):
    with MessageStore(tmp_path / "store", config()) as store:
        store.put("orders", 0, b"before raft")
    s = open_storage(tmp_path)
    assert s.last_index() == 0 and s.end_offset() > 0
    assert bodies(s) == [b"before raft"]
    fill(s, 1)
    s.publish(1)
    assert bodies(s)[0] == b"before raft" and len(bodies(s)) == 3
    close(s)


def test_a_leaders_own_entries_go_out_as_appended_and_a_cut_tail_is_read_from_the_log(
        tmp_path):
    """Its proposals are handed to every follower as the same objects (encoded once), not
    read back from the CommitLog; once a tail is cut, what replaced it is what is read."""
    s = open_storage(tmp_path)
    with s.own_entries():
        fill(s, 3)
    first, again = s.entries(1, 3), s.entries(1, 3)
    assert all(a is b for a, b in zip(first, again, strict=True))
    s.truncate(3)
    fill(s, 1, term=2, size=2000)  # a new leader's bytes, from the network
    third = s.entries(3, 3)[0]
    assert third.term == 2 and third is not first[2] and third.data != first[2].data
    assert s.entries(1, 2)[0] is not first[0]  # (the cut forgot them all: read back)
    assert [e.data for e in s.entries(1, 2)] == [e.data for e in first[:2]]
    close(s)


def _published_view(s) -> tuple[list, dict]:
    """What readers are given of `s`: each queue's units (offset, size, tag hash) and
    where each key's records are."""
    units = {key: list(cq.units(0, 100)) for key, cq in s.store.queue_table.queues.items()}
    keys = {k: sorted(s.store.index.lookup(k, 0, 1 << 62, 100)) for k in ("k1", "k2", "k3")}
    return units, keys


def test_records_read_once_are_published_as_a_parse_would_publish_them(tmp_path):
    """A leader's records as it built them, a follower's as it verified them: each is
    published without being parsed again, into the same queue units and key index a
    parse of the bytes gives; a read-ahead that does not match the bytes is not used."""
    leader = open_storage(tmp_path / "l")
    entries: list[bytes] = []
    app = RaftAppender(leader.store, leader.end_offset, lambda data, _n: entries.append(data),
                       lambda _fn: None, HOST, leader.known)
    leader.store.appender = app
    for i, (tags, keys) in enumerate([("red", "k1 k2"), (None, "k3"), ("blue", None)]):
        leader.store.put(TOPIC, i % 2, b"body %d" % i, tags=tags, keys=keys)
    app.flush()
    with leader.own_entries():
        leader.append([Entry(1, 1, entries[0])])
    follower, parsed = open_storage(tmp_path / "f"), open_storage(tmp_path / "p")
    for s in (follower, parsed):
        s.append(leader.entries(1, 1))
    assert len(leader.known) == len(follower.known) == 3  # one read-ahead a record
    parsed.known.clear()  # (publishes by parsing the bytes)
    stale = next(iter(follower.known))  # what a cut tail left at that offset
    follower.known[stale] = (1, "elsewhere", 9, 9, 9, 9, ["k9"])
    for s in (leader, follower, parsed):
        assert s.publish(1) == {(TOPIC, 0), (TOPIC, 1)}
        assert s.known == {}
    want = _published_view(parsed)
    assert want[1]["k1"] and want[1]["k3"] and len(want[0][(TOPIC, 0)]) == 2
    assert _published_view(leader) == want and _published_view(follower) == want
    for s in (leader, follower, parsed):
        close(s)
