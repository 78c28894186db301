"""A snapshot of the store installed on real files (raft.snapshots over
raft.commitlog_storage): an empty member takes a leader's CommitLog from its first
segment (after retention cut the older ones) and its queues start where the leader's
records do; a member holding a committed prefix keeps it and takes the rest; one
whose store ends before the leader's first byte refuses; a chunk sent twice or out
of turn is answered with the offset wanted; a flipped bit is refused, not indexed;
and all of it survives a restart."""

from __future__ import annotations

import pytest

from broker_core.errors import StoreCorruptError
from tests.broker_core.raft.disk import TOPIC, bodies, close, open_storage, reopen
from tests.broker_core.raft.test_commitlog_storage import fill

MEMBERS = ("a=h:1:2", "b=h:3:4", "c=h:5:6")


def send(leader, follower, index: int, chunk: int = 10_000, flip_at: int | None = None) -> int:
    """Every chunk as the leader sends them (each answered with the offset wanted)."""
    start, end = leader.snapshot_size(index)
    offset = start
    while 0 <= offset < end:
        data = bytearray(leader.snapshot_read(index, offset, min(chunk, end - offset)))
        if flip_at is not None and offset <= flip_at < offset + len(data):
            data[flip_at - offset] ^= 0x40
        offset = follower.install(index, start, offset, bytes(data), end)
    return offset


def from_min(storage) -> list[bytes]:
    low = storage.store.queue_offsets(TOPIC, 0)[0]
    return [m.body for m in storage.store.get(TOPIC, 0, low, 10_000).messages]


def test_an_empty_member_takes_a_store_whose_first_segments_retention_removed(tmp_path):
    leader = open_storage(tmp_path / "l")
    sent = fill(leader, 30)
    leader.publish(30)
    while leader.commitlog.min_offset < 2 * leader.segment_bytes:
        assert leader.commitlog.delete_oldest() is not None
    first = leader.commitlog.min_offset
    follower = open_storage(tmp_path / "f")
    start, end = leader.snapshot_size(30)
    assert start == first and follower.install(30, start, start + 5, b"x", end) == start
    assert send(leader, follower, 30) == end
    follower.install_done(30, 1, MEMBERS, end)
    assert follower.publish(30) == {(TOPIC, 0)}
    assert (follower.last_index(), follower.first_index()) == (30, 31)
    assert follower.config() == (30, MEMBERS)
    low = follower.store.queue_offsets(TOPIC, 0)[0]
    assert low > 0 and from_min(follower) == sent[low:]  # the queue starts at the records
    more = fill(leader, 3)  # entries follow the snapshot, at the same offsets
    follower.append(leader.entries(31, 33))
    follower.publish(33)
    assert from_min(follower) == (sent + more)[low:]
    follower = reopen(follower)
    assert (follower.last_index(), follower.config()) == (33, (30, MEMBERS))
    assert from_min(follower) == (sent + more)[low:]
    close(follower)
    close(leader)


def test_a_member_holding_a_committed_prefix_keeps_it_and_takes_the_rest(tmp_path):
    leader = open_storage(tmp_path / "l")
    sent = fill(leader, 10)
    follower = open_storage(tmp_path / "f")
    follower.append(leader.entries(1, 10))
    follower.publish(6)  # 7-10 held, not known committed: they go
    sent += fill(leader, 20)
    leader.publish(30)
    start, end = leader.snapshot_size(30)
    held = follower.commitlog.write_offset
    assert follower.install(30, start, start, b"", end) == held  # not from the leader's 0
    assert send(leader, follower, 30) == end
    follower.install_done(30, 1, MEMBERS, end)
    follower.publish(30)
    assert bodies(follower) == sent and follower.last_index() == 30
    close(follower)
    close(leader)


def test_a_member_whose_store_ends_before_the_leaders_first_byte_refuses(tmp_path):
    leader = open_storage(tmp_path / "l")
    follower = open_storage(tmp_path / "f")
    fill(leader, 2)
    follower.append(leader.entries(1, 2))
    follower.publish(2)
    fill(leader, 30)
    leader.publish(32)
    while leader.commitlog.min_offset <= follower.commitlog.write_offset:
        assert leader.commitlog.delete_oldest() is not None
    start, end = leader.snapshot_size(32)
    assert follower.install(32, start, start, b"", end) == -1
    close(follower)
    close(leader)


def test_a_flipped_bit_in_a_chunk_is_refused_not_indexed(tmp_path):
    leader = open_storage(tmp_path / "l")
    fill(leader, 5)
    leader.publish(5)
    follower = open_storage(tmp_path / "f")
    end = send(leader, follower, 5, flip_at=1000)  # inside the first record's body
    with pytest.raises(StoreCorruptError, match="does not verify"):
        follower.install_done(5, 1, MEMBERS, end)
    assert bodies(follower) == []
    close(follower)
    close(leader)


@pytest.mark.parametrize("cut_first", [False, True])
def test_a_copy_torn_by_a_crash_is_cut_on_start_and_taken_again(tmp_path, cut_first):
    """The member stops half way (no install_done): on start it holds no record of the
    torn copy (nor, when the leader's store began past 0, anything but an empty segment
    where it starts), and the next copy installs whole."""
    leader = open_storage(tmp_path / "l")
    sent = fill(leader, 30)
    leader.publish(30)
    if cut_first:
        while leader.commitlog.min_offset < leader.segment_bytes:
            assert leader.commitlog.delete_oldest() is not None
    follower = open_storage(tmp_path / "f")
    start, end = leader.snapshot_size(30)
    offset = start
    while offset < (start + end) // 2:
        offset = follower.install(30, start, offset,
                                  leader.snapshot_read(30, offset, 10_000), end)
    follower = reopen(follower)  # (close without install_done: as after a SIGKILL)
    assert follower.last_index() == 0 and bodies(follower) == []
    assert follower.commitlog.write_offset in (0, start)
    assert send(leader, follower, 30) == end
    follower.install_done(30, 1, MEMBERS, end)
    follower.publish(30)
    low = follower.store.queue_offsets(TOPIC, 0)[0]
    assert from_min(follower) == sent[low:] and (low > 0) == cut_first
    close(follower)
    close(leader)
