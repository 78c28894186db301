"""The embedded ZooKeeper: starts, answers kazoo, keeps its data across a restart."""

import pytest
from kazoo.client import KazooClient

from broker_core.cluster.zookeeper import ZooKeeperServer, four_letter
from broker_core.cluster.zookeeper import available as zk_missing

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(bool(zk_missing()), reason=zk_missing() or "")]


def test_shared_server_answers_kazoo(zookeeper, zk_root):
    zk = KazooClient(hosts=zookeeper.addr, timeout=1.0)
    zk.start(timeout=10)
    try:
        zk.create(f"{zk_root}/x", b"1", makepath=True)
        assert zk.get(f"{zk_root}/x")[0] == b"1"
        assert four_letter(zookeeper.addr, "ruok") == "imok"
    finally:
        zk.stop()
        zk.close()


def test_restart_keeps_persistent_nodes(tmp_path):
    server = ZooKeeperServer(tmp_path / "zk").start()
    try:
        zk = KazooClient(hosts=server.addr, timeout=1.0)
        zk.start(timeout=10)
        zk.create("/kept", b"v", makepath=True)
        zk.stop()
        server.stop()
        server.start()
        zk = KazooClient(hosts=server.addr, timeout=1.0)
        zk.start(timeout=10)
        assert zk.get("/kept")[0] == b"v"
        zk.stop()
    finally:
        server.stop()
