"""A node's term and vote survive a SIGKILL at any moment whole: a child process saves
votes as fast as it can and is killed; what is read back is one it saved, never torn,
never older than one it had reported saved."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from broker_core.raft.vote_file import VoteFile

CHILD = r"""
import sys
from pathlib import Path
from broker_core.raft.vote_file import VoteFile
f = VoteFile(Path(sys.argv[1]))
term = f.term
while True:
    term += 1
    f.save_vote(term, f"n{term % 3}")
    print(term, flush=True)
"""


def test_a_vote_read_back_after_a_sigkill_is_whole_and_not_older_than_reported(tmp_path):
    path = tmp_path / "vote.json"
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)],
                                 stdout=subprocess.PIPE, text=True)
        reported = int(child.stdout.readline())  # at least one saved
        time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        rest = child.stdout.read().split()
        child.wait()
        reported = max([reported, *map(int, rest)])
        back = VoteFile(path)
        assert back.term >= reported and back.voted_for == f"n{back.term % 3}"


def test_a_term_never_goes_back_and_a_damaged_file_is_refused(tmp_path):
    f = VoteFile(tmp_path / "vote.json")
    f.save_vote(3, "a")
    with pytest.raises(ValueError, match="terms never go back"):
        f.save_vote(2, None)
    assert json.loads((tmp_path / "vote.json").read_text()) == {"term": 3, "voted_for": "a"}
    (tmp_path / "vote.json").write_text("{")
    with pytest.raises(ValueError, match="could vote twice"):
        VoteFile(tmp_path / "vote.json")
