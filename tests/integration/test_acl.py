"""Access control on a real broker (`cluster up --acl`): a client without credentials,
with a wrong secret or a garbled handshake is refused in one line while the broker
serves others; rules added and removed with `floodgate acl` take effect on the next
request of connections already open; deny wins; system topics are named, not caught
by `*`; a bad rule is refused in one line; no secret or key in any output."""

from __future__ import annotations

import json
import logging
import socket
import time
import urllib.error
import urllib.request

import pytest

from broker_core.acl.credentials import Credentials, load
from broker_core.acl.handshake import AuthFailed
from broker_core.client.attempts import SendFailed
from broker_core.client.connection import Connection
from broker_core.client.consumer import Consumer
from broker_core.client.group_calls import Refused
from broker_core.client.producer import Producer
from broker_core.protocol import Code, Op, encode_frame, encode_json
from console.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def acl_cluster(cluster_factory, monkeypatch):
    cluster = cluster_factory(1, acl=True)
    # recorded as unset, and unset again after the test (`--credentials` sets them, and
    # a command given the cluster file the admin token's)
    monkeypatch.setenv("FLOODGATE_CREDENTIALS", "")
    monkeypatch.setenv("FLOODGATE_ADMIN_TOKEN_FILE", "")
    return cluster


def floodgate(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_users_rules_and_refusals_end_to_end(acl_cluster, capsys, tmp_path, monkeypatch,
                                            caplog):
    c = acl_cluster
    path, admin = str(c.path), str(c.credentials)
    addr = c.file.brokers[0].addr
    code, body = Connection(addr).call(Op.STATS, b"{}")  # no credentials
    assert code == Code.NO_PERMISSION and b"authenticate first" in body

    app_file = tmp_path / "app.toml"
    code, out, err = floodgate(capsys, "--credentials", admin, "acl", "user", "add",
                               "--cluster", path, "--name", "app",
                               "--write-credentials", str(app_file))
    assert code == 0, err
    app = load(app_file)
    with pytest.raises(AuthFailed, match="authentication failed"):
        Connection(addr, credentials=Credentials("app", "not-the-secret")).call(Op.STATS)
    # a producer with the wrong secret fails its send at once, saying why, and its fuse
    # holds nothing against the broker; the asyncio one (`bench produce`) waited out its
    # whole run with the error unread in a task
    with Producer(c.file.addrs, credentials=Credentials("app", "not-the-secret")) as p:
        with pytest.raises(SendFailed, match="user app: authentication failed"):
            p.send("orders", b"x")
        assert not p.fuse.snapshot().isolated
    # a consumer with it polled nothing for ever, without a word
    with Consumer("billing", "orders", c.file.addrs,
                  credentials=Credentials("app", "not-the-secret")) as consumer:
        with pytest.raises(AuthFailed, match="user app: authentication failed"):
            consumer.poll(timeout=0.2)
    bad = tmp_path / "bad.toml"
    bad.write_text('user = "app"\nsecret = "not-the-secret"\n')
    bad.chmod(0o600)
    started = time.monotonic()
    code, _out, err = floodgate(capsys, "--credentials", str(bad), "bench", "produce",
                                "--brokers", addr, "--duration", "20")
    assert code == 1 and "user app: authentication failed" in err
    assert time.monotonic() - started < 10
    assert floodgate(capsys, "--credentials", admin, "acl", "allow", "--cluster", path,
                     "--user", "app", "--resource", "topic:ord*", "--actions", "pub")[0] == 0

    # app may not write the trace topic: its records are dropped, counted, and said
    code, out, _err = floodgate(capsys, "--credentials", str(app_file), "bench", "produce",
                                "--cluster", path, "--topic", "orders-trace", "--count", "20",
                                "--trace-rate", "1", "--json")
    trace = json.loads(out)["trace"]
    assert code == 0 and (trace["records"], trace["sent"], trace["dropped"]) == (20, 0, 20)
    assert "NO_PERMISSION: user app may not pub on topic:%TRACE%" in trace["last_error"]
    monkeypatch.setenv("FLOODGATE_CREDENTIALS", str(app_file))
    with Producer(c.file.addrs, fuse=False) as p:
        assert p.send("orders", b"paid").status == "SEND_OK"
        with pytest.raises(SendFailed, match="may not pub on topic:audit: no rule allows"):
            p.send("audit", b"x")
        # a deny over the allow, live: this producer's connection is already open
        assert floodgate(capsys, "--credentials", admin, "acl", "deny", "--cluster", path,
                         "--user", "app", "--resource", "topic:orders",
                         "--actions", "pub")[0] == 0
        with pytest.raises(SendFailed, match="denied by rule"):
            p.send("orders", b"again")
        assert p.send("orders-eu", b"still allowed").status == "SEND_OK"
    monkeypatch.setenv("FLOODGATE_CREDENTIALS", str(app_file))  # `--credentials` set admin's
    with Consumer("billing", "orders", c.file.addrs, retry=False) as consumer:
        # no sub: refused, in words (it returned nothing, for ever, without a word)
        with pytest.raises(Refused, match="NO_PERMISSION: user app may not sub on "
                                          "topic:orders"):
            consumer.poll(timeout=0.5)
    assert floodgate(capsys, "--credentials", admin, "acl", "allow", "--cluster", path,
                     "--user", "app", "--resource", "topic:orders", "--actions", "sub")[0] == 0
    assert floodgate(capsys, "--credentials", admin, "acl", "allow", "--cluster", path,
                     "--user", "app", "--resource", "group:billing", "--actions", "sub")[0] == 0
    monkeypatch.setenv("FLOODGATE_CREDENTIALS", str(app_file))
    with Consumer("billing", "orders", c.file.addrs) as consumer:
        got = []
        caplog.clear()
        with caplog.at_level(logging.WARNING, "floodgate.consumer"):
            for _ in range(30):
                got += [m.body for m in consumer.poll(timeout=0.2)]
                if got:
                    break
    assert got == [b"paid"]  # read, though its retry topic is refused: said once
    assert [r.getMessage() for r in caplog.records if "%RETRY%billing" in r.getMessage()] == [
        "billing: 1 of 1 brokers refused this client on %RETRY%billing: broker-1: "
        "NO_PERMISSION: user app may not sub on topic:%RETRY%billing: no rule allows it"]

    # bad input: one line, exit 2, nothing changed
    code, _out, err = floodgate(capsys, "--credentials", admin, "acl", "allow", "--cluster",
                                path, "--user", "app", "--resource", "queue:x",
                                "--actions", "pub")
    assert code == 2 and err.count("\n") == 1 and "a resource is" in err
    code, _out, err = floodgate(capsys, "--credentials", str(app_file), "acl", "list",
                                "--cluster", path)
    assert code == 1 and "a super user's" in err  # app may not read the ACL
    # nothing secret anywhere an operator looks
    code, out, _err = floodgate(capsys, "--credentials", admin, "acl", "list", "--cluster",
                                path, "--json")
    stats = urllib.request.urlopen(f"http://{c.file.brokers[0].http}/stats").read().decode()
    logs = (c.log_dir / "broker-1.log").read_text()
    token = c.admin_token.read_text().strip()
    for text in (out, stats, logs):
        assert app.secret not in text and load(admin).secret not in text and token not in text
        assert "stored_key" not in text and "server_key" not in text
    assert json.loads(out)["users"] == [{"name": "admin", "super": True},
                                        {"name": "app", "super": False}]
    # the refusals counted for Prometheus, by user, action and resource
    metrics_url = f"http://{c.file.brokers[0].http}/metrics"
    wanted = ('floodgate_acl_denied_total{action="pub",broker="broker-1",'
              'resource="topic:audit",user="app"} 1.0')
    changes = 'floodgate_acl_changes_total{broker="broker-1"} 5.0'  # a user, four rules
    deadline = time.monotonic() + 5
    while not (wanted in (text := urllib.request.urlopen(metrics_url).read().decode())
               and changes in text) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert wanted in text and changes in text, [
        line for line in text.splitlines() if "acl" in line]
    assert (c.log_dir / "broker-1.log").read_text().count("acl change:") == 5


def test_a_users_random_secret_is_never_lost(acl_cluster, capsys, tmp_path):
    """`acl user add --write-credentials FILE` made the user on every broker, then failed
    to write FILE (its directory missing): the random secret, never sent, was lost with
    it and the user could not be used."""
    c = acl_cluster
    path, admin = str(c.path), str(c.credentials)
    missing = tmp_path / "no-such-dir" / "app.toml"
    code, _out, err = floodgate(capsys, "--credentials", admin, "acl", "user", "add",
                                "--cluster", path, "--user", "app",
                                "--write-credentials", str(missing))
    assert code == 2 and "No such file or directory" in err and err.count("\n") == 1
    code, out, _err = floodgate(capsys, "--credentials", admin, "acl", "user", "list",
                                "--cluster", path)
    assert "app" not in out  # not made: its secret would be in no file
    first = tmp_path / "app.toml"
    assert floodgate(capsys, "--credentials", admin, "acl", "user", "add", "--cluster", path,
                     "--user", "app", "--write-credentials", str(first))[0] == 0
    assert load(first).user == "app"


def test_admin_endpoints_take_the_clusters_token_only(acl_cluster, capsys, monkeypatch):
    """On an ACL cluster /admin answered anyone on loopback: any local user could reset a
    group's offsets, wipe writes or pause a broker. Its token is made with the cluster,
    mode 0600, and sent by commands given the cluster file."""
    c = acl_cluster
    path, http = str(c.path), c.file.brokers[0].http
    assert c.admin_token.stat().st_mode & 0o777 == 0o600
    monkeypatch.setenv("FLOODGATE_ADMIN_TOKEN_FILE", "")
    req = urllib.request.Request(f"http://{http}/admin/fault", data=b'{"error_rate": 1}',
                                 method="POST", headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=5)
    assert refused.value.code == 403
    assert "this broker's admin token only" in refused.value.read().decode()
    code, _out, err = floodgate(capsys, "fault", "inject", "--broker", http,
                                "--error-rate", "1", "--duration", "5")
    assert code == 1 and "admin token only" in err
    code, out, err = floodgate(capsys, "topic", "create", "--cluster", path, "--topic", "t1")
    assert code == 0 and "t1 4 queues" in out, err  # the cluster file names the token
    monkeypatch.setenv("FLOODGATE_ADMIN_TOKEN_FILE", str(c.admin_token))
    assert floodgate(capsys, "fault", "inject", "--broker", http, "--error-rate", "1",
                     "--duration", "1")[0] == 0
    assert floodgate(capsys, "fault", "clear", "--broker", http)[0] == 0


def test_the_asyncio_producer_authenticates_too(acl_cluster, monkeypatch):
    import asyncio

    from broker_core.client.aio_producer import AsyncProducer

    monkeypatch.setenv("FLOODGATE_CREDENTIALS", str(acl_cluster.credentials))

    async def go():
        async with AsyncProducer(acl_cluster.file.addrs, fuse=False) as p:
            return await p.send("orders", b"async")

    assert asyncio.run(go()).status == "SEND_OK"
    monkeypatch.setenv("FLOODGATE_CREDENTIALS", "")
    with pytest.raises(SendFailed, match="authenticate first"):
        asyncio.run(go())


def test_a_garbled_handshake_closes_only_its_connection(acl_cluster):
    addr = acl_cluster.file.brokers[0].addr
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), 3) as raw:
        raw.sendall(encode_frame(Op.AUTH_START, 1, encode_json(
            {"mechanism": "SCRAM-SHA-256", "first": "garbage"})))
        raw.settimeout(3)
        answer = raw.recv(4096)
        assert b"authentication failed" in answer
        assert raw.recv(4096) == b""  # closed by the broker
    admin = load(acl_cluster.credentials)
    assert Connection(addr, credentials=admin).call(Op.STATS)[0] == Code.OK
