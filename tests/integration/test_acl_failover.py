"""The ACL in a replicated group: a rule added on the master alone reaches its slave
within a second or two (the HA link's tables), and after the master is SIGKILLed
the promoted slave enforces it: the user's allowed send is taken, the rest refused."""

from __future__ import annotations

import os
import signal
import uuid

import pytest

from broker_core.acl.credentials import Credentials, load
from broker_core.acl.rules import Rule
from broker_core.acl.users import User
from broker_core.client.connection import Connection
from broker_core.cluster.launcher import Cluster
from broker_core.cluster.ports import free_port_range
from broker_core.cluster.roles import group_records
from broker_core.protocol import (
    STORED_CODES,
    Code,
    Op,
    OutMessage,
    decode_json,
    encode_json,
    encode_send,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_a_promoted_slave_enforces_the_masters_rules(tmp_path, zookeeper, monkeypatch):
    monkeypatch.setenv("FLOODGATE_CREDENTIALS", "")
    cluster = Cluster(0, free_port_range(7), tmp_path / "c", segment_size="8M",
                      name=f"t{uuid.uuid4().hex[:8]}", groups=1, replicas=2,
                      replication="sync", zk=zookeeper.addr, acl=True)
    cluster.up(timeout=60)
    try:
        admin = load(cluster.credentials)
        old = group_records(cluster.file)["group-1"]
        master = cluster.file.broker(old.master)
        slave = cluster.file.broker(next(n for n in old.in_sync if n != old.master))
        conn = Connection(master.addr, credentials=admin)
        user = User.make("app", "app-secret-1")
        for req in ({"action": "add_user", "name": "app", "keys": user.to_dict()},
                    {"action": "add_rule",
                     "rule": Rule.make("app", "topic:orders", "pub").to_dict()}):
            assert conn.call(Op.ACL, encode_json(req))[0] == Code.OK  # the master only
        conn.close()
        on_slave = Connection(slave.addr, credentials=admin)
        wait_for(lambda: len(decode_json(on_slave.call(Op.ACL, encode_json(
            {"action": "list"}))[1])["rules"]) == 1, 10, "the slave has the rule")
        on_slave.close()
        os.kill(cluster.procs[master.name].pid, signal.SIGKILL)
        wait_for(lambda: group_records(cluster.file)["group-1"].epoch > old.epoch, 20,
                 "failover")
        app = Connection(slave.addr, credentials=Credentials("app", "app-secret-1"))

        def send(topic: str):
            return app.call(Op.SEND, encode_send(topic, -1, OutMessage(b"x")))

        # stored (SLAVE_NOT_AVAILABLE: its old master, killed, is not back to copy it)
        wait_for(lambda: send("orders")[0] in STORED_CODES, 15, "the promoted slave takes sends")
        code, body = send("audit")
        assert code == Code.NO_PERMISSION and b"may not pub on topic:audit" in body
        app.close()
    finally:
        cluster.down(grace=5.0)
