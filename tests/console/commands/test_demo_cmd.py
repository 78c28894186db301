"""`floodgate demo`'s refusals: said in one line, exit 2, before anything starts."""

from __future__ import annotations

import subprocess
import sys


def test_the_console_refuses_a_piped_stdout_instead_of_drawing_80x24_into_it(tmp_path):
    """`make demo | tee` drew an 80x24 frame over the 200x50 one, with no word of why."""
    got = subprocess.run([sys.executable, "-m", "console.cli", "demo", "--groups", "4",
                          "--data", str(tmp_path / "d")], capture_output=True,
                         text=True, timeout=60)
    assert got.returncode == 2 and got.stdout == ""
    assert "the console needs a terminal on stdout" in got.stderr
    assert "--headless SECONDS" in got.stderr and got.stderr.count("\n") == 1
    assert not (tmp_path / "d").exists()  # nothing started, nothing written
