"""`floodgate bench produce` against a sync group whose slave died: every send is acked
(stored on the master) and the summary says they were not stored as the group promises,
by the broker's status, instead of a clean `errors 0`."""

from __future__ import annotations

import json
import signal
import uuid

import pytest

from broker_core.cluster.launcher import Cluster
from broker_core.cluster.ports import free_port_range
from broker_core.cluster.roles import group_records
from console.cli import main

pytestmark = pytest.mark.timeout(120)


def test_sends_acked_without_their_slave_are_counted_by_status(tmp_path, zookeeper, capsys):
    c = Cluster(0, free_port_range(7), tmp_path, segment_size="8M", groups=1, replicas=2,
                replication="sync", zk=zookeeper.addr, name=f"t{uuid.uuid4().hex[:8]}")
    c.up(timeout=60)
    try:
        bench = ["bench", "produce", "--cluster", str(c.path), "--topic", "orders",
                 "--count", "5", "--concurrency", "1"]
        assert main(bench) == 0
        assert "acked SLAVE" not in capsys.readouterr().out  # both copies: SEND_OK

        slave = next(b.name for b in c.file.brokers
                     if b.name != group_records(c.file)["group-1"].master)
        c.procs[slave].send_signal(signal.SIGKILL)
        c.procs[slave].wait(10)
        assert main([*bench, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["acked"] == 5 and doc["errors"] == 0
        # the master waits for its slave up to its sync timeout, then drops it from in-sync
        assert sum(doc["degraded"].values()) == 5, doc["degraded"]
        assert set(doc["degraded"]) <= {"FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"}
        assert main(bench) == 0
        out = capsys.readouterr().out
        assert "acked SLAVE_NOT_AVAILABLE: 5 (stored on its master alone" in out, out
    finally:
        c.down(grace=3)


def test_nothing_acknowledged_prints_no_rt_figures(capsys):
    """Issue 59: against a dead port it printed `RT p50 0.69 ms p99 0.69 ms`, the time
    connections took to be refused, as if sends had been measured."""
    dead = f"127.0.0.1:{free_port_range(1)}"
    bench = ["bench", "produce", "--brokers", dead, "--count", "3", "--timeout", "0.5"]
    assert main(bench) == 1
    out, err = capsys.readouterr()
    assert "RT" not in out and "p50" not in out
    assert out.startswith("nothing acknowledged: 3 send(s) failed")
    assert "errors " in out and "Connection refused" in out  # what failed, said
    assert err.splitlines()[-1].startswith("floodgate bench: error: no message was acknowledged")
    assert main([*bench, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["acked"] == 0 and doc["errors"] == 3
    assert [doc[k] for k in ("mean_s", "p50_s", "p99_s", "p999_s", "max_s")] == [None] * 5
