"""A real local cluster for the console's live tests (one for the session)."""

from __future__ import annotations

import random

import pytest

from console.demo.runner import port_free


def free_base_port(count: int) -> int:
    for _ in range(200):
        base = random.randrange(23000, 39000, 2)
        if all(port_free(p) for p in range(base, base + count)):
            return base
    raise RuntimeError("no free port range")


@pytest.fixture(scope="session")
def cluster3(tmp_path_factory):
    from broker_core.client.producer import Producer
    from broker_core.cluster.launcher import Cluster

    cluster = Cluster(3, free_base_port(6), tmp_path_factory.mktemp("cluster3"))
    cluster.up()
    producer = Producer(cluster.file.addrs, fuse=False)
    try:
        for _ in range(300):  # some history for the heatmap
            producer.send("console", b"x" * 64)
    finally:
        producer.close()
    yield cluster
    cluster.down(grace=3)
