"""A leader's store sent to a member that cannot be caught up by entries (thesis 5.3):
one that joins empty, or one behind the leader's first entry. One chunk in flight a
member, stop and wait: the member answers with the offset it takes next, so a chunk
lost or sent twice costs a resend, never a hole. The snapshot is the store up to an
entry committed when it began (its bytes do not change while they are sent); entries
after it follow as Appends once it is installed.
"""

from __future__ import annotations

from broker_core.raft.messages import AppendReply, Snapshot, SnapshotReply

CHUNK = 1 << 20  # a chunk a frame: a link's buffer holds eight


def snapshot_out(node, peer: str, now: float, answered: bool = False):
    """The next chunk of `peer`'s snapshot (begun at the commit point if none is on):
    once the last is `answered`, or sent again when it was not within a beat (not
    with every proposal: a chunk is a megabyte)."""
    s = node.storage
    state = node.snap.get(peer)
    if state is not None and not answered and now < node.beat_due[peer]:
        return []
    if state is not None and not answered:
        node.counters["snapshot_chunks_resent"] += 1
    node.beat_due[peer] = now + node.heartbeat_s
    if state is None:
        index = node.commit
        start, end = s.snapshot_size(index)
        state = node.snap[peer] = [index, s.term_at(index), s.config(index)[1] or (),
                                   start, end, start]
    index, term, members, offset, end, _start = state
    try:
        data = s.snapshot_read(index, offset, min(CHUNK, end - offset))
    except LookupError:  # its bytes went (retention) while it was sent: a newer one
        del node.snap[peer]
        return []
    node.counters["snapshot_chunks"] += 1
    return [(peer, Snapshot(node.term, node.name, index, term, tuple(members), state[5],
                            offset, end, data))]


def on_snapshot(node, msg: Snapshot, now: float):
    """A follower takes a chunk; the last one replaces its log by the snapshot."""
    if msg.term < node.term:
        return [(msg.leader, AppendReply(node.term, node.name, False, 0))]
    node.follow(msg.term, msg.leader, now)
    if msg.last_index <= node.commit or _holds(node.storage, msg.last_index, msg.last_term):
        # holds all it carries already: a chunk sent again, come after the entries that
        # followed the install (its log past the snapshot is kept, the Raft paper's
        # figure 13: installed again, it lost an entry it had acknowledged)
        node.commit = max(node.commit, msg.last_index)
        return [(msg.leader, SnapshotReply(node.term, node.name, msg.last_index, msg.end))]
    want = node.storage.install(msg.last_index, msg.start, msg.offset, msg.data, msg.end)
    if want >= msg.end:
        node.storage.install_done(msg.last_index, msg.last_term, msg.members, msg.end)
        node.commit = msg.last_index
        node.configure(now)
    return [(msg.leader, SnapshotReply(node.term, node.name, msg.last_index, want))]


def _holds(storage, index: int, term: int) -> bool:
    return storage.first_index() - 1 <= index <= storage.last_index() and \
        storage.term_at(index) == term


def on_snapshot_reply(node, msg: SnapshotReply, now: float):
    state = node.snap.get(msg.follower)
    if state is None or state[0] != msg.last_index:
        return []
    peer = msg.follower
    node.heard[peer] = now
    if msg.want < 0:  # it cannot take this store (a gap before the leader's first byte)
        del node.snap[peer]
        node.want_snapshot.discard(peer)
        node.counters["snapshots_refused"] += 1
        node.beat_due[peer] = now + node.election_s  # (not retried at every beat)
        return []
    if msg.want < state[4]:
        state[3] = msg.want
        return snapshot_out(node, peer, now, answered=True)
    del node.snap[peer]
    node.want_snapshot.discard(peer)
    node.counters["snapshots_sent"] += 1
    node.counters["snapshot_bytes"] += state[4] - state[5]
    node.match[peer] = max(node.match[peer], state[0])
    node.next[peer] = state[0] + 1  # its log ends there now
    node._advance_commit()
    return node._replicate(peer, now)
