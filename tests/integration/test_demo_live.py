"""`make demo` itself, headless with its console in the same process (`--headless 52
--json --with-tui`, the Makefile's own flags read from the Makefile): on this
2-core machine the producer carries the rate the demo announces, the stalled
master's group is taken out of routing (excluded, not overflow) within a second,
no fault-free group is isolated, and act 2 shows rule 4 (the cap of 1 of 4 full,
the group isolated earliest serves again as overflow). The tight figures (p99,
max, CPU) are the bench's (bench/cpu_per_message.py): this suite shares a loaded
machine."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from broker_core.cluster.ports import free_port_range
from broker_core.cluster.zookeeper import available as zk_missing

pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(bool(zk_missing()), reason=zk_missing() or "")]
ROOT = Path(__file__).resolve().parents[2]


def make_demo_args() -> list[str]:
    """The flags `make demo` gives `floodgate demo`."""
    line = re.search(r"floodgate demo(.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert line, "the Makefile's demo target runs floodgate demo"
    return shlex.split(line.group(1))


def test_make_demo_isolates_the_stalled_master_and_no_healthy_group(tmp_path):
    args = make_demo_args()
    groups = int(args[args.index("--groups") + 1])
    assert groups >= 4  # seed 000's 30 % cap lets the fuse take one out
    floodgate = Path(sys.executable).with_name("floodgate")
    proc = subprocess.run(
        [str(floodgate), "demo", *args, "--headless", "52", "--json", "--with-tui",
         "--base-port", str(free_port_range(3 * 2 * groups + 2))],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)
    assert run["achieved_rate"] >= 0.8 * run["target_rate"], run  # the rate it announced
    faulted = {b["name"]: b["faults"] for b in run["brokers"] if b["faulted"]}
    assert faulted == {"group-2-a": ["stall"], "group-3-a": ["errors"]}, run["brokers"]
    assert run["false_isolations"] == 0, (run["false_isolation_events"], run["retry_reasons"],
                                          run["error_reasons"], run["excused"])
    stalls = run["stall_detection"]
    assert stalls and all(s["within_goal"] for s in stalls), stalls
    events = [(t["broker"], t["event"]) for t in run["fuse_transitions"]]
    # out of routing, not served as overflow: its isolation comes before any overflow
    assert events.index(("group-2", "isolate")) < min(
        (i for i, e in enumerate(events) if e == ("group-2", "overflow")), default=len(events))
    isolated = [b for b, e in events if e == "isolate"]
    assert isolated[:2] == ["group-2", "group-3"], run["fuse_transitions"]
    # act 2: the cap (1 of 4) is full, so group-2, isolated earliest, serves again
    assert ("group-2", "overflow") in events, events
    assert run["client_lateness"]["beats"] > 1000  # the producer's loop beat all along
    assert not list(tmp_path.glob("floodgate-demo-*"))  # its temporary data: gone
