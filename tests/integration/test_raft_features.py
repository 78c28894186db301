"""The broker's features on raft groups (issue 62: "the fuse, trace, delayed messages,
transactions, ordered queues and ACL work in both modes"), as a user runs them: real
broker processes, `cluster up --groups G --replicas 3 --consensus raft`, clients that
find each group's leader from its members (ha.raft_routes).

One plain cluster of two raft groups serves the delayed, transactional, ordered and
traced sends (each on a topic of its own); the ACL and TLS take a cluster of their own.
The fuse on raft groups is test_raft_cluster's (a slow leader hands its group over)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import defaultdict

import pytest

from broker_core.client.connection import Connection
from broker_core.client.consumer import Consumer
from broker_core.client.producer import Producer
from broker_core.cluster.launcher import Cluster
from broker_core.cluster.ports import free_port_range
from broker_core.cluster.readback import read_queue_bodies
from broker_core.errors import BrokerError
from broker_core.ha.routes import routes_for
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

GROUPS = ("group-1", "group-2")


def raft_cluster(data, groups: int, **kw) -> Cluster:
    n = groups * 3
    return Cluster(0, free_port_range(3 * n + 1), data, segment_size="8M",
                   name=f"t{uuid.uuid4().hex[:8]}", groups=groups, replicas=3,
                   consensus="raft", **kw)


@pytest.fixture(scope="module")
def raft(tmp_path_factory):
    """Two raft groups of three (their halves checked back every 0.5 s: a transaction's
    check-back within the test's patience); the routes to their leaders."""
    cluster = raft_cluster(tmp_path_factory.mktemp("raft") / "c", len(GROUPS),
                           extra_args=["--tx-check-s", "0.5"])
    cluster.up(timeout=60)
    routes = None
    try:
        routes = routes_for(cluster.file)
        routes.wait()
        assert cluster.file.raft and not cluster.file.zk and not cluster.controllers
        yield cluster, routes
    finally:
        if routes is not None:
            routes.close()
        cluster.down(grace=5.0)


def leader_conn(routes, group: str) -> Connection:
    return Connection(routes.records[group].master_addr)


def stored(routes, topic: str, where: set[tuple[str, int]]) -> dict[tuple[str, int], list[bytes]]:
    """What each (group, queue) of `where` holds of `topic` on its leader, in order."""
    out = {}
    for group in {g for g, _q in where}:
        conn = leader_conn(routes, group)
        try:
            for g, q in where:
                if g == group:
                    out[(g, q)] = list(read_queue_bodies(conn, topic, q))
        finally:
            conn.close()
    return out


# -- 1. delayed messages ------------------------------------------------------------------

def test_delayed_sends_are_acked_at_once_and_consumed_only_when_due(raft):
    """A send with delay="1s" is acknowledged at once by the group's leader, held in
    %SCHEDULE%, and reaches a consumer one second after it was sent, not before: on
    both groups' leaders; the undelayed sends made after them come first."""
    _cluster, routes = raft
    topic, n = "raft-delayed", 8
    sent: dict[bytes, float] = {}
    with Producer(routes=routes, fuse=False) as p, \
            Consumer("delayed", topic, routes=routes, retry=False) as c:
        c.poll(timeout=0.2)  # in the group: from the queues' first message anyway
        groups = set()
        for i in range(n):
            body = b"later-%d" % i
            t0 = time.time()
            r = p.send(topic, body, delay="1s")
            sent[body] = t0
            assert r.status == "SEND_OK" and time.time() - t0 < 1.0, (r, time.time() - t0)
            groups.add(r.broker)
        assert groups == set(GROUPS)  # the delay held on each group's leader
        for i in range(n):
            assert p.send(topic, b"now-%d" % i).status == "SEND_OK"
        got: list[tuple[float, bytes]] = []

        def all_in() -> bool:
            got.extend((time.time(), m.body) for m in c.poll(64, timeout=0.1))
            return len(got) >= 2 * n

        wait_for(all_in, 20, "the delayed and the undelayed messages", every=0)
    bodies = [b for _t, b in got]
    assert sorted(bodies) == sorted([*sent, *(b"now-%d" % i for i in range(n))])
    first_delayed = min(i for i, b in enumerate(bodies) if b.startswith(b"later"))
    assert all(b.startswith(b"now") for b in bodies[:first_delayed]) and first_delayed == n
    lates = {b: at - sent[b] for at, b in got if b in sent}
    # due one second after it was stored (a store time in whole ms), delivered then
    assert all(0.999 <= late < 3.0 for late in lates.values()), lates


# -- 2. transactions ----------------------------------------------------------------------

def test_committed_halves_are_consumed_and_rolled_back_ones_never(raft):
    """TransactionProducer against the leaders: a half is stored, the local transaction
    decides; COMMIT (also one decided by a check-back after UNKNOWN) reaches the topic
    and its consumers, ROLLBACK (also a local transaction that raises) never does."""
    from broker_core.client.transaction import TransactionProducer

    _cluster, routes = raft
    topic = "raft-paid"
    checked: list[bytes] = []

    def check(m) -> str:
        checked.append(m.body)
        return "COMMIT" if m.body.startswith(b"unknown-commit") else "ROLLBACK"

    results = {}
    with TransactionProducer("payments", routes=routes, check=check, poll_s=0.1,
                             end_oneway=False) as tx:
        for i in range(4):
            results[b"commit-%d" % i] = tx.send_in_transaction(
                topic, b"commit-%d" % i, lambda m: "COMMIT")
            results[b"rollback-%d" % i] = tx.send_in_transaction(
                topic, b"rollback-%d" % i, lambda m: "ROLLBACK")
        results[b"raises"] = tx.send_in_transaction(topic, b"raises", lambda m: 1 / 0)
        results[b"unknown-commit"] = tx.send_in_transaction(
            topic, b"unknown-commit", lambda m: "UNKNOWN")
        results[b"unknown-rollback"] = tx.send_in_transaction(
            topic, b"unknown-rollback", lambda m: "UNKNOWN")
        assert {r.send.broker for r in results.values()} == set(GROUPS)
        assert all(r.ended for b, r in results.items() if not b.startswith(b"unknown")), results
        assert results[b"raises"].state == "ROLLBACK"
        wait_for(lambda: {b"unknown-commit", b"unknown-rollback"} <= set(checked), 20,
                 "the leaders' check-backs of the UNKNOWN halves")
    assert tx.counters.end_failures == 0  # every COMMIT and ROLLBACK taken by a leader
    committed = sorted([b"commit-%d" % i for i in range(4)] + [b"unknown-commit"])
    got: list[bytes] = []
    with Consumer("ledger", topic, routes=routes, retry=False) as c:
        wait_for(lambda: got.extend(m.body for m in c.poll(64, timeout=0.1))
                 or len(got) >= len(committed), 20, "the committed messages")
        got += [m.body for m in c.poll(64, timeout=1.0)]  # nothing behind them
    assert sorted(got) == committed
    # the topic itself holds the committed messages only, each once
    where = {(g, q) for g in GROUPS for q in range(4)}
    assert sorted(b for bodies in stored(routes, topic, where).values()
                  for b in bodies) == committed


# -- 3. ordered sends and the orderly consumer --------------------------------------------

KEYS, PER_KEY = 12, 50  # 600 handled 20 ms each: the second joins long before the end


def test_a_keys_messages_stay_in_one_queue_in_order_and_are_consumed_in_order(raft):
    """Sends with an order key: each key's messages in one queue of one group's leader,
    stored in send order; two orderly consumers of a group (the second joining while
    the first works: a rebalance) never handle one queue at once and handle each key's
    messages in the order they were sent, every one of them."""
    _cluster, routes = raft
    topic = "raft-orders"
    where: dict[str, set[tuple[str, int]]] = defaultdict(set)
    with Producer(routes=routes, fuse=False) as p:
        for i in range(PER_KEY):
            for k in range(KEYS):
                r = p.send(topic, f"k{k}:{i}".encode(), order_key=f"k{k}")
                where[f"k{k}"].add((r.broker, r.queue_id))
    assert all(len(q) == 1 for q in where.values()), where
    queue_of = {key: next(iter(qs)) for key, qs in where.items()}
    assert {g for g, _q in queue_of.values()} == set(GROUPS) and len(set(queue_of.values())) > 2
    held = stored(routes, topic, set(queue_of.values()))
    for key, queue in queue_of.items():
        in_queue = [int(b.split(b":")[1]) for b in held[queue] if b.startswith(f"{key}:".encode())]
        assert in_queue == list(range(PER_KEY)), (key, in_queue)

    lock = threading.Lock()
    spans: dict[tuple, list[tuple[float, float, str]]] = defaultdict(list)
    seqs: dict[str, list[int]] = defaultdict(list)

    def handler(name: str):
        def handle(m) -> None:
            start = time.monotonic()
            time.sleep(0.02)
            key, seq = m.body.decode().split(":")
            with lock:
                spans[(m.store_host_raw, m.queue_id)].append((start, time.monotonic(), name))
                seqs[key].append(int(seq))
        return handle

    def handled() -> int:
        with lock:
            return sum(len(set(s)) for s in seqs.values())

    def handled_by(name: str) -> bool:
        with lock:
            return any(n == name for s in spans.values() for _a, _b, n in s)

    stops = [threading.Event(), threading.Event()]
    consumers = [Consumer("billing", topic, routes=routes, client_id=f"c{i}", orderly=True)
                 for i in range(2)]
    threads = []
    try:
        for i, consumer in enumerate(consumers):
            t = threading.Thread(target=consumer.consume, args=(handler(f"c{i}"),),
                                 kwargs={"timeout": 0.1, "stop": stops[i]}, daemon=True)
            t.start()
            threads.append(t)
            wait_for(lambda i=i: handled_by(f"c{i}"), 20, f"c{i} handling")
        wait_for(lambda: handled() >= KEYS * PER_KEY, 60, "every message handled")
    finally:
        for stop, t, c in zip(stops, threads, consumers, strict=False):
            stop.set()
            t.join(10)
            c.close()
        for c in consumers[len(threads):]:
            c.close()
    overlaps = []
    for queue, qspans in spans.items():
        end, owner = 0.0, None
        for start, stop_at, name in sorted(qspans):
            if start < end and name != owner:
                overlaps.append((queue, owner, name))
            if stop_at > end:
                end, owner = stop_at, name
    assert overlaps == []
    for key, got in seqs.items():  # a redelivery of what came before is at least once
        top = -1
        for s in got:
            assert s <= top + 1, (key, got)
            top = max(top, s)
    assert all(set(s) == set(range(PER_KEY)) for s in seqs.values()) and len(seqs) == KEYS


# -- 5. trace -----------------------------------------------------------------------------

def test_a_traced_send_is_found_with_its_store_and_its_delivery(raft, capsys):
    """A traced send and a traced consumer; `floodgate trace --cluster FILE --key K`
    finds the message on its group's leader with the producer's send, the broker's
    store and the group's delivery, nothing missing."""
    from console.cli import main

    cluster, routes = raft
    topic = "raft-traced"
    with Producer(routes=routes, trace_rate=1.0, fuse=False) as p:
        sent = [p.send(topic, b"paid %d" % i, keys=f"pay-{i}") for i in range(6)]
        client = p.client_id
    assert {r.broker for r in sent} == set(GROUPS)
    got: list = []
    with Consumer("audit", topic, routes=routes, trace_rate=1.0, retry=False) as c:
        wait_for(lambda: got.extend(c.poll(64, timeout=0.1)) or len(got) >= 6, 20,
                 "the traced messages")
        c.commit()

    def trace(key: str) -> dict | None:
        code = main(["trace", "--cluster", str(cluster.path), "--key", key, "--json"])
        out = capsys.readouterr().out
        if code != 0:
            return None
        doc = json.loads(out)
        t = doc["timelines"]
        return doc if (t and t[0]["send"] and t[0]["store"] and t[0]["deliveries"]
                       and not t[0]["missing"]) else None

    for r in (sent[0], next(s for s in sent if s.broker != sent[0].broker)):
        i = sent.index(r)
        doc = wait_for(lambda i=i: trace(f"pay-{i}"), 20, f"the trace of pay-{i}")
        [t] = doc["timelines"]
        assert t["id"] == r.msg_id and t["topic"] == topic
        assert (t["queue_id"], t["queue_offset"]) == (r.queue_id, r.queue_offset)
        assert t["send"]["client"] == client and t["send"]["status"] == "SEND_OK"
        assert t["store"]["code"] == "OK" and t["store"]["queue_offset"] == r.queue_offset
        [d] = t["deliveries"]["audit"]
        assert d["committed_ms"] and d["delay_ms"] >= 0
        assert t["missing"] == [] and doc["unreachable"] == {}


# -- 4. the ACL and TLS -------------------------------------------------------------------

def test_acl_and_tls_on_a_raft_group(tmp_path, monkeypatch, capsys):
    """`cluster up --groups 1 --replicas 3 --consensus raft --acl --tls`: the leader
    refuses a plain client and a user without permission (NO_PERMISSION, saying why);
    a user allowed a topic sends to it; the admin (the credentials file the cluster
    writes) sends and reads back through the routes, over TLS."""
    from broker_core.acl.credentials import Credentials, load
    from broker_core.acl.tls import ENV_CA
    from broker_core.client.attempts import SendFailed
    from broker_core.client.connection import BrokerUnavailable
    from broker_core.protocol import STORED_CODES, Code, Op, OutMessage, encode_send
    from console.cli import main

    for name in ("FLOODGATE_CREDENTIALS", ENV_CA, "FLOODGATE_ADMIN_TOKEN_FILE"):
        monkeypatch.setenv(name, "")  # as a user starts it: nothing set (unset again after)
    cluster = raft_cluster(tmp_path / "c", 1, acl=True, tls=True)
    routes = None
    try:
        cluster.up(timeout=20)
        path, admin_file = str(cluster.path), str(cluster.credentials)
        monkeypatch.setenv(ENV_CA, str(cluster.tls_ca))
        monkeypatch.setenv("FLOODGATE_CREDENTIALS", admin_file)
        routes = routes_for(cluster.file)
        routes.wait()
        leader = routes.records["group-1"]
        app_file = tmp_path / "app.toml"
        assert main(["--credentials", admin_file, "acl", "user", "add", "--cluster", path,
                     "--name", "app", "--write-credentials", str(app_file)]) == 0
        assert main(["--credentials", admin_file, "acl", "allow", "--cluster", path,
                     "--user", "app", "--resource", "topic:orders", "--actions", "pub"]) == 0
        capsys.readouterr()
        app = load(app_file)

        def send(conn: Connection, topic: str):
            return conn.call(Op.SEND, encode_send(topic, -1, OutMessage(b"x")), 5)

        # TLS: a plain client is refused by the leader
        monkeypatch.setenv(ENV_CA, "")
        monkeypatch.setenv("FLOODGATE_CREDENTIALS", "")
        with pytest.raises(BrokerUnavailable, match="a broker serving TLS"):
            Connection(leader.master_addr).call(Op.STATS, b"{}")
        monkeypatch.setenv(ENV_CA, str(cluster.tls_ca))
        monkeypatch.setenv("FLOODGATE_CREDENTIALS", admin_file)
        # the ACL: the leader refuses what app may not do, takes what it may
        conn = Connection(leader.master_addr, credentials=app)
        try:
            code, body = send(conn, "audit")
            assert code == Code.NO_PERMISSION, (Code(code).name, body)
            assert b"user app may not pub on topic:audit" in body
            assert send(conn, "orders")[0] in STORED_CODES
        finally:
            conn.close()
        with pytest.raises(BrokerError, match="authentication failed"):
            Connection(leader.master_addr,
                       credentials=Credentials("app", "not-the-secret")).call(Op.STATS)
        with Producer(routes=routes, credentials=app, fuse=False) as p:
            with pytest.raises(SendFailed, match="NO_PERMISSION: user app may not pub on "
                                                 "topic:audit"):
                p.send("audit", b"y")
            assert p.send("orders", b"allowed").status == "SEND_OK"
        # the admin sends and reads back through the routes (its credentials: the env's)
        with Producer(routes=routes, fuse=False) as p:
            bodies = {b"ledger-%d" % i for i in range(20)}
            assert all(p.send("ledger", b).status == "SEND_OK" for b in bodies)
        got: set[bytes] = set()
        with Consumer("ledger-readers", "ledger", routes=routes, retry=False) as c:
            wait_for(lambda: got.update(m.body for m in c.poll(64, timeout=0.1))
                     or got >= bodies, 20, "the admin's messages")
        assert got == bodies
    finally:
        if routes is not None:
            routes.close()
        cluster.down(grace=5.0)
