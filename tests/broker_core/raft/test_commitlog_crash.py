"""SIGKILL in the middle of appends and of term changes, in a real process: a node that
said an entry (or a term and vote) was saved still holds it after the kill, whatever
step of the write the kill landed on, and opens consistent (readers see only what was
published, and the next entry goes where the log ends)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from broker_core.raft.messages import Entry
from broker_core.raft.vote_file import VoteFile
from tests.broker_core.raft.disk import bodies, close, entry, open_storage

ROOT = Path(__file__).resolve().parents[3]

APPENDER = """
import sys
from pathlib import Path
from broker_core.raft.messages import Entry
from tests.broker_core.raft.disk import entry, open_storage
s = open_storage(Path(sys.argv[1]), sync=True)
i = s.last_index()
while True:
    i += 1
    s.append([Entry(1, i, entry(s, [f"m{i}".encode() * 40]))])
    if i % 3 == 0:
        s.publish(i - 1)
    print(i, flush=True)
"""

VOTER = """
import sys
from pathlib import Path
from broker_core.raft.vote_file import VoteFile
v = VoteFile(Path(sys.argv[1]))
t = v.term
while True:
    t += 1
    v.save_vote(t, f"n{t % 3}")
    print(t, flush=True)
"""


def kill_after(script: str, arg: Path, lines: int) -> int:
    """Run `script`, SIGKILL it once it said `lines` saves; the last one it said."""
    proc = subprocess.Popen([sys.executable, "-c", script, str(arg)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    last = 0
    try:
        for _ in range(lines):
            line = proc.stdout.readline()
            assert line, "the child stopped before it was killed"
            last = int(line)
        proc.send_signal(signal.SIGKILL)
        for line in proc.stdout:  # said before the kill landed: saved too
            last = int(line)
    finally:
        proc.kill()
        proc.wait()
    return last


@pytest.mark.parametrize("lines", [1, 17, 60])
def test_entries_said_saved_survive_a_sigkill_at_any_step(tmp_path, lines):
    said = kill_after(APPENDER, tmp_path, lines)
    s = open_storage(tmp_path, sync=True)
    try:
        assert s.last_index() >= said  # the one being written may be there too, or not
        held = [e.data for e in s.entries(1, said)]
        assert all(f"m{i}".encode() * 40 in data for i, data in enumerate(held, 1))
        seen = bodies(s)
        assert seen == [f"m{i}".encode() * 40 for i in range(1, len(seen) + 1)]
        assert len(seen) <= said  # nothing unpublished shown
        nxt = s.last_index() + 1
        s.append([Entry(2, nxt, entry(s, [b"after the crash"]))])
        s.publish(nxt)
        assert bodies(s)[-1] == b"after the crash" and len(bodies(s)) == nxt
    finally:
        close(s)


@pytest.mark.parametrize("lines", [1, 25])
def test_a_term_and_vote_said_saved_survive_a_sigkill(tmp_path, lines):
    path = tmp_path / "vote.json"
    said = kill_after(VOTER, path, lines)
    v = VoteFile(path)
    assert v.term >= said  # a later one may have landed too; never an older one
    assert v.voted_for == f"n{v.term % 3}"
