"""`floodgate demo` in a real terminal (tmux): after the faults start, the
pane shows the broker table with an ISOLATED broker; `q` stops everything."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker_core.cluster.ports import free_port_range, port_free

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[3]
BROKERS = 6
# pytest's own COLUMNS/LINES (80x24) would reach the pane through tmux's
# environment and win over the pane's real size in get_terminal_size
UNSIZED = "unset COLUMNS LINES; "


def tmux(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=10)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_demo_in_tmux_isolates_a_broker(tmp_path):
    base = free_port_range(2 * BROKERS + 1)
    session = f"floodgate-test-{base}"
    floodgate = Path(sys.executable).with_name("floodgate")
    cmd = (f"{UNSIZED}cd {shlex.quote(str(ROOT))} && {shlex.quote(str(floodgate))} demo "
           f"--brokers {BROKERS} --rate 1000 --base-port {base} --data {tmp_path / 'demo'}")
    assert tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "45", cmd).returncode == 0
    pane = ""
    try:
        deadline = time.monotonic() + 60
        # a table row, its state then msgs/s (the lines under the table say why, no rate)
        rows = r"^ broker-\d\s+(UP|SLOW|FAILING|ISOLATED|DOWN)\??\s+(-|[\d.,k]+/s)"
        while time.monotonic() < deadline:
            pane = tmux("capture-pane", "-p", "-t", session).stdout
            # a capture can catch the terminal mid-repaint: wait for a whole table
            if (re.search(r"^ broker-\d\s+ISOLATED", pane, re.M)
                    and len(re.findall(rows, pane, re.M)) == BROKERS):
                break
            time.sleep(0.2)  # the pane again
        assert re.search(r"^ broker\s+state\s+in\s+out", pane, re.M), pane
        assert len(re.findall(rows, pane, re.M)) == BROKERS, pane
        assert re.search(r"^ broker-\d\s+ISOLATED", pane, re.M), pane
        # the header says what the script does now (console.demo.narration): act 1 runs
        # from 6 s to 36 s of its cycle
        clock = re.search(r"refresh 1 s · (\d):(\d\d) · ", pane)
        assert clock, pane.splitlines()[0]
        if 6 <= 60 * int(clock[1]) + int(clock[2]) < 36:
            assert "broker-2 stalls (6-36 s)" in pane.splitlines()[0], pane.splitlines()[0]
        tmux("send-keys", "-t", session, "q")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and tmux("has-session", "-t", session).returncode == 0:
            time.sleep(0.5)
        assert tmux("has-session", "-t", session).returncode != 0, "demo did not quit on q"
        # every broker and the producer endpoint stopped: their ports are free again
        assert all(port_free(p) for p in range(base, base + 2 * BROKERS + 1))
        assert (tmp_path / "demo" / "cluster.toml").exists()  # --data is kept
    finally:
        tmux("kill-session", "-t", session)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_console_command_in_tmux_quits_on_q():
    session = f"floodgate-console-{free_port_range(1)}"
    floodgate = Path(sys.executable).with_name("floodgate")
    data = ROOT / "tests" / "console" / "recorded" / "demo"
    cmd = f"{UNSIZED}{shlex.quote(str(floodgate))} console --replay {shlex.quote(str(data))} --refresh 60"
    assert tmux("new-session", "-d", "-s", session, "-x", "150", "-y", "40", cmd).returncode == 0
    try:
        pane = ""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "broker-6" not in pane:
            time.sleep(0.5)
            pane = tmux("capture-pane", "-p", "-t", session).stdout
        assert re.search(r"^ broker-3\s+ISOLATED", pane, re.M), pane
        tmux("send-keys", "-t", session, "q")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and tmux("has-session", "-t", session).returncode == 0:
            time.sleep(0.3)
        assert tmux("has-session", "-t", session).returncode != 0
    finally:
        tmux("kill-session", "-t", session)
