"""A real local cluster for the console's live tests (one for the session)."""

from __future__ import annotations

import pytest

from broker_core.cluster.ports import free_port_range


@pytest.fixture(scope="session")
def cluster3(tmp_path_factory):
    from broker_core.client.producer import Producer
    from broker_core.cluster.launcher import Cluster

    cluster = Cluster(3, free_port_range(6), tmp_path_factory.mktemp("cluster3"))
    cluster.up()
    producer = Producer(cluster.file.addrs, fuse=False)
    try:
        for _ in range(300):  # some history for the heatmap
            producer.send("console", b"x" * 64)
    finally:
        producer.close()
    yield cluster
    cluster.down(grace=3)
