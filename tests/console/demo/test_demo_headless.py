"""`floodgate demo --headless N --json`: the summary, the fault script, and
nothing left behind (its temporary data dir removed, every port free)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker_core.cluster.ports import free_port_range, port_free

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[3]


def test_headless_demo_summary(tmp_path):
    base = free_port_range(13)
    floodgate = Path(sys.executable).with_name("floodgate")
    proc = subprocess.run(
        [str(floodgate), "demo", "--headless", "10", "--json", "--rate", "400",
         "--base-port", str(base)],
        capture_output=True, text=True, timeout=90, cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["acked"] > 1000 and summary["errors"] >= 0
    assert [b["name"] for b in summary["brokers"]] == [f"broker-{i}" for i in range(1, 7)]
    assert {b["state"] for b in summary["brokers"]} <= {"UP", "SLOW", "ISOLATED", "DOWN"}
    assert all(set(b) == {"name", "state", "p99_s", "max_s", "faulted", "faults", "isolations"}
               for b in summary["brokers"])
    assert {"false_isolations", "stall_detection", "client_lateness", "excused"} <= set(summary)
    assert summary["faults"][0]["broker"] == "broker-2"
    assert "stall_ms=800.0" in summary["faults"][0]["action"]
    for t in summary["fuse_transitions"]:
        assert set(t) == {"time", "broker", "event", "reason"}
        assert t["event"] in ("isolate", "release", "overflow", "reexclude")
    # the demo's clients: two consumer groups judged by the brokers, a throttled flood,
    # payments published transactionally and consumed orderly by the ledger
    assert set(summary["consumer_groups"]) == {"billing", "warehouse", "ledger"}
    tx = summary["transactions"]
    assert tx["committed"] > 0 and tx["rolled_back"].get("producer", 0) > 0, tx
    assert tx["locks_held"] > 0, tx
    assert tx["acl_denied"] == 0, tx  # every client allowed what its job needs, no more
    assert summary["consumer_groups"]["billing"]["status"] in ("OK", "WARNING")
    assert summary["throttled_total"] > 0
    assert not list(tmp_path.glob("floodgate-demo-*"))  # its own temporary data dir: gone
    assert all(port_free(p) for p in range(base, base + 13))
