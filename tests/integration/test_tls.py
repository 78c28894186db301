"""TLS on the brokers' ports: `floodgate certs make`; a cluster with `--tls` carries
sends, pulls and its HTTP port over TLS; a plain client and a client trusting another
CA are refused with one clear line; mutual TLS refuses a client without a certificate;
a replicated group's HA link runs over TLS with the ACL on (sync sends acknowledged)."""

from __future__ import annotations

import time
import urllib.request

import pytest

from broker_core.acl.credentials import load
from broker_core.acl.tls import ENV_CA, ENV_CERT, ENV_KEY, broker_http, make_certs
from broker_core.client.connection import BrokerUnavailable, Connection
from broker_core.client.consumer import Consumer
from broker_core.client.producer import Producer
from broker_core.protocol import Code, Op, OutMessage, encode_send
from console.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def no_tls_env(monkeypatch):
    for name in (ENV_CA, ENV_CERT, ENV_KEY, "FLOODGATE_CREDENTIALS"):
        monkeypatch.setenv(name, "")  # unset again after the test
    return monkeypatch


def test_certs_make_and_refuses_to_overwrite(tmp_path, capsys):
    assert main(["certs", "make", "--out", str(tmp_path / "tls")]) == 0
    assert (tmp_path / "tls" / "broker.key").stat().st_mode & 0o777 == 0o600
    assert main(["certs", "make", "--out", str(tmp_path / "tls")]) == 2
    assert "holds ca.pem" in capsys.readouterr().err


def test_a_tls_cluster_end_to_end_and_clear_refusals(cluster_factory, no_tls_env, tmp_path,
                                                     capsys):
    cluster = cluster_factory(1, tls=True)
    addr, http = cluster.file.brokers[0].addr, cluster.file.brokers[0].http
    with pytest.raises(BrokerUnavailable, match="a broker serving TLS"):
        Connection(addr).call(Op.STATS, b"{}")
    # the load generator (asyncio) and the HTTP polls say the same; they said "connection
    # lost" and "not an HTTP port (a broker's data port?)"
    capsys.readouterr()
    assert main(["bench", "produce", "--brokers", addr, "--count", "1"]) == 1
    assert "a broker serving TLS? give --tls-ca" in capsys.readouterr().err
    assert main(["status", "--brokers", http, "--json"]) == 1
    assert "a broker serving TLS? give --tls-ca" in capsys.readouterr().out
    assert main(["bench", "produce", "--brokers", addr, "--count", "1",
                 "--tls-ca", str(cluster.tls_ca)]) == 0  # where the operator adds it
    other = make_certs(tmp_path / "other", ["127.0.0.1"])
    no_tls_env.setenv(ENV_CA, str(other["ca"]))
    with pytest.raises(BrokerUnavailable, match="TLS handshake failed.*certificate verify"):
        Connection(addr).call(Op.STATS, b"{}")
    no_tls_env.setenv(ENV_CA, str(cluster.tls_ca))
    with Producer(cluster.file.addrs, fuse=False) as p:
        for i in range(200):
            p.send("orders", b"m%d" % i)
    got = []
    with Consumer("g", "orders", cluster.file.addrs) as c:
        deadline = time.monotonic() + 15
        while len(got) < 200 and time.monotonic() < deadline:
            got += c.poll(64, timeout=0.2)
    assert len(got) == 200
    url, ctx = broker_http(http, "/stats")
    assert url.startswith("https://")
    assert b'"broker"' in urllib.request.urlopen(url, context=ctx, timeout=5).read()
    # the console polls over TLS on one kept connection, not a handshake a poll
    from console.data.sources import HttpBrokers

    console = HttpBrokers([("b0", http)], timeout=5)
    try:
        samples = [console.fetch()[0] for _ in range(3)]
    finally:
        console.close()
    assert [s.error for s in samples] == [None] * 3 and console.http.opened == 1


def test_mutual_tls_refuses_a_client_without_a_certificate(cluster_factory, no_tls_env,
                                                           tmp_path):
    cluster = cluster_factory(1, tls=True, extra_args=["--tls-verify-clients"])
    addr = cluster.file.brokers[0].addr
    no_tls_env.setenv(ENV_CA, str(cluster.tls_ca))
    with pytest.raises(BrokerUnavailable):
        Connection(addr).call(Op.STATS, b"{}")
    tls_dir = cluster.tls_ca.parent
    no_tls_env.setenv(ENV_CERT, str(tls_dir / "client.pem"))
    no_tls_env.setenv(ENV_KEY, str(tls_dir / "client.key"))
    assert Connection(addr).call(Op.STATS, b"{}")[0] == Code.OK


def test_a_replicated_group_over_tls_with_the_acl_on(tmp_path, zookeeper, no_tls_env):
    import uuid

    from broker_core.cluster.launcher import Cluster
    from broker_core.cluster.ports import free_port_range
    from broker_core.cluster.roles import group_records

    cluster = Cluster(0, free_port_range(7), tmp_path / "c", segment_size="8M",
                      name=f"t{uuid.uuid4().hex[:8]}", groups=1, replicas=2,
                      replication="sync", zk=zookeeper.addr, acl=True, tls=True)
    cluster.up(timeout=60)
    try:
        no_tls_env.setenv(ENV_CA, str(cluster.tls_ca))
        rec = group_records(cluster.file)["group-1"]
        conn = Connection(cluster.file.broker(rec.master).addr,
                          credentials=load(cluster.credentials))
        code, _body = conn.call(Op.SEND, encode_send("orders", -1, OutMessage(b"x")), 5)
        assert code == Code.OK  # the slave acknowledged it over the TLS HA link
        conn.close()
        no_tls_env.setenv(ENV_CA, "")  # a user's credentials, the CA forgotten: the hint
        with pytest.raises(BrokerUnavailable, match="a broker serving TLS"):
            Connection(cluster.file.broker(rec.master).addr,
                       credentials=load(cluster.credentials)).call(Op.STATS, b"{}")
    finally:
        cluster.down(grace=5.0)
