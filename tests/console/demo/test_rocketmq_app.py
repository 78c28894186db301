"""The demo's RocketMQ application (on in `make demo`) on a cluster with TLS and
the ACL, as the demo runs its own: as the demo's `rocketmq` user it sends through the
gRPC ports, its consumer gets the messages, counts their delay and acknowledges them
(the group's offsets move)."""

from __future__ import annotations

import threading

import pytest

from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_the_demo_rocketmq_app_sends_receives_and_acknowledges(cluster_factory, monkeypatch,
                                                               tmp_path):
    from broker_core.acl import tls
    from broker_core.acl.credentials import load
    from broker_core.client import admin
    from console.demo import rocketmq_clients
    from console.demo.clients import RMQ_RATE
    from console.demo.users import make_users

    c = cluster_factory(1, acl=True, tls=True, grpc=True)
    monkeypatch.setenv(tls.ENV_CA, str(c.tls_ca))
    users = make_users(c.path, c.credentials, tmp_path / "users")
    broker = c.file.brokers[0]
    token = (c.path.parent / "admin.token").read_text().strip()
    admin.topic(broker.http, "POST", {"topic": rocketmq_clients.TOPIC, "queues": 2},
                token=token)

    class Delays:  # (console.demo.delays's interface)
        counted: list = []

        def record(self, group, msgs):
            self.counted += [(group, m.body) for m in msgs]

    delays, stop = Delays(), threading.Event()
    threads = rocketmq_clients.start([broker.grpc], stop, load(users["rocketmq"]), delays,
                                     RMQ_RATE)
    try:
        wait_for(lambda: len(delays.counted) >= 10, 30, "ten messages received")
        doc = wait_for(lambda: (d := admin.offsets(
            broker.http, query={"group": "rmq-audit", "topic": rocketmq_clients.TOPIC},
            token=token)) and sum(q["committed"] for q in d["queues"]) >= 10 and d,
            20, "their acknowledgements committed")
    finally:
        stop.set()
        for t in threads:
            t.join(15)
    assert {g for g, _b in delays.counted} == {"rmq-audit"}
    assert all(b.endswith(b"rmq order") for _g, b in delays.counted)  # stamped, then ours
    assert not any(t.is_alive() for t in threads)
    assert doc["group"] == "rmq-audit"
