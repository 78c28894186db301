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
