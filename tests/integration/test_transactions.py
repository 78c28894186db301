"""Transactional messages through a real broker process: a half is invisible until
committed; rolled back (or its local transaction raising) it never reaches a
consumer; UNKNOWN is checked back with a live producer of the group; fifteen
UNKNOWN answers roll it back; a commit sent twice delivers once; halves pending
when the broker is SIGKILLed are settled after its restart; and the operator's
`tx list` / `tx resolve`."""

from __future__ import annotations

import signal
import time

import pytest

from broker_core.client.consumer import Consumer
from broker_core.client.transaction import TransactionProducer
from broker_core.cluster.health import wait_healthy
from broker_core.protocol import Code, Op, decode_json, encode_json
from console.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CHECK_S = "0.2"  # the brokers' --tx-check-s: check-backs within the test's patience


def collect(addrs, want: int, timeout: float, group: str = "g") -> list[bytes]:
    got, deadline = [], time.monotonic() + timeout
    with Consumer(group, "paid", addrs) as c:
        while len(got) < want and time.monotonic() < deadline:
            got += [m.body for m in c.poll(64, timeout=0.1)]
        if want == 0 or len(got) >= want:  # nothing more behind them
            got += [m.body for m in c.poll(64, timeout=0.5)]
    return got


def wait_until(cond, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cond()


def test_commit_rollback_unknown_and_a_raising_local_transaction(cluster_factory):
    cluster = cluster_factory(1, extra_args=["--tx-check-s", CHECK_S])
    addrs = cluster.file.addrs
    checked = []

    def check(m):
        checked.append((m.body, m.checks))
        return "COMMIT" if m.body == b"unknown-then-commit" else "ROLLBACK"

    with TransactionProducer("payments", addrs, check=check, poll_s=0.1,
                             end_oneway=False) as tx:  # `ended`: the broker wrote it
        committed = tx.send_in_transaction("paid", b"commit", lambda m: "COMMIT")
        assert committed.ended and committed.tx_id == f"broker-1:{committed.send.queue_offset}"
        assert tx.send_in_transaction("paid", b"rollback", lambda m: "ROLLBACK").ended
    with TransactionProducer("payments", addrs, check=check, poll_s=0.1) as tx:  # oneway
        assert tx.send_in_transaction("paid", b"commit-oneway", lambda m: "COMMIT").ended
        assert not tx.send_in_transaction("paid", b"unknown-then-commit",
                                          lambda m: "UNKNOWN").ended
        assert not tx.send_in_transaction("paid", b"unknown-then-rollback",
                                          lambda m: "UNKNOWN").ended
        raised = tx.send_in_transaction("paid", b"raises", lambda m: 1 / 0)
        assert raised.state == "ROLLBACK" and raised.ended
        wait_until(lambda: len(checked) >= 2, 10)
        # a second COMMIT of a committed half (the producer's, after a check-back's)
        code, body = tx.producer.request("broker-1", Op.END_TRANSACTION, encode_json(
            {"offset": committed.send.queue_offset, "decision": "COMMIT", "by": "producer"}))
        assert code == Code.OK and decode_json(body) == {"state": "committed", "already": True}
    assert sorted(collect(addrs, 3, 10)) == [b"commit", b"commit-oneway",
                                             b"unknown-then-commit"]
    assert {b for b, _n in checked} == {b"unknown-then-commit", b"unknown-then-rollback"}
    assert all(n == 1 for _b, n in checked)  # each settled by its first check-back


def test_fifteen_unknown_check_backs_roll_the_half_back(cluster_factory, capsys):
    cluster = cluster_factory(1, extra_args=["--tx-check-s", "0.1"])
    addrs = cluster.file.addrs
    checks = []
    with TransactionProducer("payments", addrs, check=lambda m: checks.append(m.checks)
                             or "UNKNOWN", poll_s=0.05) as tx:
        tx.send_in_transaction("paid", b"never-known", lambda m: "UNKNOWN")
        wait_until(lambda: main(["tx", "list", "--cluster", str(cluster.path), "--json"]) == 0
                   and '"pending": []' in capsys.readouterr().out, 20)
    assert checks == list(range(1, 16)), checks
    main(["tx", "list", "--cluster", str(cluster.path)])
    out = capsys.readouterr().out
    assert "no half message pending" in out and "checks-exhausted 1" in out, out
    assert collect(addrs, 0, 1) == []


def test_halves_pending_at_a_sigkill_are_settled_after_the_restart(cluster_factory):
    cluster = cluster_factory(1, extra_args=["--tx-check-s", CHECK_S])
    addrs, entry = cluster.file.addrs, cluster.file.brokers[0]
    # no check-back (it goes away); each COMMIT or ROLLBACK written before the kill
    with TransactionProducer("payments", addrs, end_oneway=False) as tx:
        for i in range(10):
            tx.send_in_transaction("paid", b"c%d" % i, lambda m: "COMMIT")
            tx.send_in_transaction("paid", b"r%d" % i, lambda m: "ROLLBACK")
            tx.send_in_transaction("paid", b"u%d" % i, lambda m: "UNKNOWN")
    cluster.procs[entry.name].send_signal(signal.SIGKILL)
    cluster.procs[entry.name].wait(10)
    cluster.start_broker(entry)
    wait_healthy(entry.http, 30, cluster.procs[entry.name])
    with TransactionProducer("payments", addrs, check=lambda m: "COMMIT", poll_s=0.1) as tx:
        got = collect(addrs, 20, 20)
    assert sorted(got) == sorted([b"c%d" % i for i in range(10)] +
                                 [b"u%d" % i for i in range(10)])


def test_an_operator_lists_and_settles_a_stuck_half(cluster_factory, capsys):
    cluster = cluster_factory(1, extra_args=["--tx-check-s", "30"])
    addrs, path = cluster.file.addrs, str(cluster.path)
    with TransactionProducer("payments", addrs) as tx:
        stuck = tx.send_in_transaction("paid", b"stuck", lambda m: "UNKNOWN")
    assert main(["tx", "list", "--cluster", path]) == 0
    out = capsys.readouterr().out
    assert stuck.tx_id in out and "payments" in out and "none asking" in out, out
    assert main(["tx", "resolve", "--cluster", path, "--id", stuck.tx_id, "--commit"]) == 0
    assert "committed" in capsys.readouterr().out
    # past two of the broker's check passes (0.5 s): the watermark has moved past the half,
    # and its outcome is still named (it said "resolved already" when a pass came between)
    time.sleep(1.2)
    assert main(["tx", "resolve", "--cluster", path, "--id", stuck.tx_id, "--rollback"]) == 1
    assert "committed already" in capsys.readouterr().err
    assert main(["tx", "resolve", "--cluster", path, "--id", "broker-1:999", "--commit"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no half message at offset 999" in err, err
    assert main(["tx", "resolve", "--cluster", path, "--id", "nonsense", "--commit"]) == 2
    assert "BROKER:OFFSET" in capsys.readouterr().err
    assert collect(addrs, 1, 10) == [b"stuck"]


def test_a_message_sent_after_a_one_way_commit_is_stored_after_it(cluster_factory):
    """The END goes one way on the producer's connection, followed at once by the next
    message of the same order: the broker stores the commit first (frames in order)."""
    from broker_core.client.connection import Connection
    from broker_core.cluster.readback import read_queue_bodies

    cluster = cluster_factory(1)
    addrs = cluster.file.addrs
    with TransactionProducer("payments", addrs) as tx:
        for n in range(50):
            order = f"order-{n % 5}"
            r = tx.send_in_transaction("paid", b"paid %d" % n, lambda m: "COMMIT",
                                       order_key=order)
            tx.producer.send("paid", b"receipt %d" % n, order_key=order)
    conn = Connection(addrs["broker-1"])
    try:
        bodies = [b for q in range(4) for b in read_queue_bodies(conn, "paid", q)]
    finally:
        conn.close()
    assert r.ended and len(bodies) == 100
    for n in range(50):
        assert bodies.index(b"paid %d" % n) < bodies.index(b"receipt %d" % n), n


def test_a_check_back_ask_with_a_bad_poll_interval_is_refused_in_one_line(cluster_factory):
    cluster = cluster_factory(1)
    with pytest.raises(ValueError, match="poll_s"):
        TransactionProducer("payments", cluster.file.addrs, check=lambda m: "COMMIT", poll_s=0)
    with TransactionProducer("payments", cluster.file.addrs) as tx:
        for bad in (0, -1, 3600, "5", True):
            code, body = tx.producer.request("broker-1", Op.CHECK_TRANSACTION, encode_json(
                {"group": "payments", "poll_s": bad}))
            assert code != Code.OK and b"poll_s" in body and b"\n" not in body, (bad, body)
        code, body = tx.producer.request("broker-1", Op.CHECK_TRANSACTION, encode_json(
            {"group": "payments", "poll_s": 5}))  # the broker kept serving
        assert code == Code.OK and decode_json(body)["checks"] == []
