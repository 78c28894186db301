"""The reaper of a namespaced cluster: the launcher's death must not leave its hosts.

`cluster up --netns` starts one in a session of its own; it polls the launcher and,
once the launcher is gone without having taken the cluster down (its layout file is
still there), heals every network fault, kills what runs in the namespaces and
removes them, their links and the bridge.

    python -m broker_core.cluster.netns_reaper LAUNCHER_PID LAYOUT_FILE
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from broker_core.cluster import netfault
from broker_core.cluster.netns import NetLayout, destroy


def start_reaper(layout: NetLayout, launcher_pid: int, state: Path) -> subprocess.Popen:
    """A process of its own session that removes `layout` (killing what runs in it)
    once `launcher_pid` is gone; `state` is the layout's file, deleted by a clean
    `down` (then the reaper only exits)."""
    state.write_text(json.dumps(layout.to_dict()), encoding="utf-8")
    return subprocess.Popen(
        [sys.executable, "-m", "broker_core.cluster.netns_reaper", str(launcher_pid),
         str(state)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)


def alive(pid: int) -> bool:
    """Running, and not a zombie nobody has waited for."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def reap(launcher_pid: int, state: Path) -> int:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the launcher's group stop is not ours
    while alive(launcher_pid):
        if not state.exists():
            return 0  # taken down cleanly
        time.sleep(0.5)
    if not state.exists():
        return 0
    layout = NetLayout.from_dict(json.loads(state.read_text(encoding="utf-8")))
    netfault.heal(layout, state.parent)  # rules and relays first, then the hosts
    destroy(layout)
    state.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3:
        sys.exit(reap(int(sys.argv[1]), Path(sys.argv[2])))
    sys.exit("usage: python -m broker_core.cluster.netns_reaper LAUNCHER_PID LAYOUT_FILE")
