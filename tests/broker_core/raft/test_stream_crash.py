"""SIGKILL at any step of a stream member's appends and term changes, in a real process.
The child follows a leader's stream as a member does (its own
StreamFollower, on a real store in sync flush mode), while terms change every few
records (the vote saved, then where the term's bytes begin). After the kill, whatever
step it landed on:

- every byte it acknowledged is held, in whole records that verify;
- readers see nothing past the last commit it was told (the published mark lags);
- every term it said begun is in its vote and its epoch history;
- the log goes on where it ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from broker_core.ha.epochs import EpochFile
from broker_core.raft.published_mark import PublishedMark, reopen
from broker_core.raft.vote_file import VoteFile
from broker_core.store import MessageStore
from tests.broker_core.raft.disk import SEGMENT, config

ROOT = Path(__file__).resolve().parents[3]

FOLLOWER = """
import sys
from pathlib import Path
from broker_core.ha import wire
from broker_core.ha.epochs import EpochFile
from broker_core.ha.slave import MasterInfo
from broker_core.raft.published_mark import PublishedMark, reopen
from broker_core.raft.stream_replication import StreamFollower
from broker_core.raft.vote_file import VoteFile
from broker_core.store import MessageStore
from tests.broker_core.raft.disk import config

d = Path(sys.argv[1])
leader = MessageStore(d / "leader", config())
store = MessageStore(d / "store", config(flush="sync"))
mark = PublishedMark(d / "published.json")
end = [reopen(store.replica_log(), mark)]
votes, epochs = VoteFile(d / "vote.json"), EpochFile(d / "epochs.json")


class Link:  # the leader's end: an acknowledgement said is one the leader counted
    def write(self, frame):
        print("ack", wire.decode_ack(frame[wire.FRAME.size:]), flush=True)


def span(start, stop):  # the leader's bytes, across its segments
    cl, out = leader.commitlog, bytearray()
    while start < stop:
        seg = cl.segment_for(start)
        n = min(stop, seg.end_offset) - start
        out += seg.mm[start - seg.start_offset:start - seg.start_offset + n]
        start += n
    return bytes(out)


f = StreamFollower(store, epochs, "a", "g", MasterInfo("m", "127.0.0.1:1", 1),
                   known_epoch=lambda: votes.term, on_records=lambda t: None,
                   on_meta=lambda doc: None, on_truncate=lambda at, cut: None,
                   log_end=end, on_config=lambda at, members: None)
f.welcomed = True
term, ends, i = votes.term, [], 0
while True:
    if i % 7 == 0:  # a term change: the vote first, then where the term's bytes begin
        term += 1
        votes.save_vote(term, "m")
        epochs.begin(term, end[0])
        print("term", term, end[0], flush=True)
    at = leader.commitlog.write_offset
    leader.put("orders", 0, b"m%d." % i * 40)
    top = leader.commitlog.write_offset
    commit = ends[-3] if len(ends) >= 3 else -1  # the leader's word lags by a few
    f._frames([(wire.DATA, wire.data_frame(at, top, 0, term, span(at, top), commit)[5:])],
              Link())
    if commit >= 0:
        print("commit", commit, flush=True)
        if i % 5 == 0:  # (saved after it was said: the mark never leads what was said)
            mark.save(store.commitlog.write_offset)
    ends.append(top)
    i += 1
"""


def kill_after(path: Path, acks: int) -> dict[str, list[list[int]]]:
    """Run the follower; SIGKILL it once it said `acks` acknowledgements. What it said,
    by kind (each line's numbers)."""
    proc = subprocess.Popen([sys.executable, "-c", FOLLOWER, str(path)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    said: dict[str, list[list[int]]] = {"ack": [], "commit": [], "term": []}

    def take(line: str) -> None:
        kind, *numbers = line.split()
        said[kind].append([int(n) for n in numbers])

    try:
        while len(said["ack"]) < acks:
            line = proc.stdout.readline()
            assert line, "the child stopped before it was killed"
            take(line)
        proc.send_signal(signal.SIGKILL)
        for line in proc.stdout:  # said before the kill landed: done too
            take(line)
    finally:
        proc.kill()
        proc.wait()
    return said


@pytest.mark.parametrize("acks", [1, 9, 40, 450])  # 450: past the first 64 KiB segment
def test_a_stream_member_killed_at_any_step_keeps_what_it_said(tmp_path, acks):
    said = kill_after(tmp_path, acks)
    acked = said["ack"][-1][0]
    told = said["commit"][-1][0] if said["commit"] else 0
    term, began = said["term"][-1]

    votes, epochs = VoteFile(tmp_path / "vote.json"), EpochFile(tmp_path / "epochs.json")
    assert votes.term >= term and votes.voted_for == "m"
    assert (term, began) in epochs.history.entries or epochs.history.last_epoch > term

    with MessageStore(tmp_path / "store", config(flush="sync")) as store:
        tail = reopen(store.replica_log(), PublishedMark(tmp_path / "published.json"))
        assert tail >= acked  # every acknowledged byte held
        shown = store.get("orders", 0, 0, 100_000).messages
        assert all(m.physical_offset + m.size <= told for m in shown)

        # what it holds is whole records that verify, in the leader's order
        store.replica_log().publish(tail, crc=True)
        held = store.get("orders", 0, 0, 100_000).messages
        assert [m.body for m in held] == [b"m%d." % i * 40 for i in range(len(held))]
        last = held[-1].physical_offset + held[-1].size
        assert last == tail or (last < tail and tail % SEGMENT == 0)  # (then a blank)
        assert epochs.history.term_of_last_byte(tail) <= epochs.history.last_epoch

        after = store.put("orders", 0, b"after the kill")  # the log goes on from its end
        assert after.physical_offset >= tail
        assert store.get("orders", 0, len(held), 1).messages[0].body == b"after the kill"
