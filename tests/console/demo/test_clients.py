"""The demo's other clients (console.demo.clients): the payments' and the warehouse's
rules, the flood's quota, and the clients process itself against a real broker: its
groups consume and commit, the flood is throttled by the quota it set, payments are
published transactionally with their receipts behind them, and SIGTERM ends it cleanly."""

from __future__ import annotations

import json
import logging
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from broker_core.cluster.cluster_file import ClusterFile
from broker_core.cluster.members import group_entries, single_entries
from broker_core.protocol.record import Message
from broker_core.protocol.system_topics import PROP_RETRY_TIMES
from console.demo import clients
from console.demo.script import CYCLE_S
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]


def message(keys: str | None, body: bytes = b"", retried: int = 0) -> Message:
    props = {PROP_RETRY_TIMES: str(retried)} if retried else {}
    return Message("demo", 0, 0, body, None, keys, 0, 0, 0, 0, props)


def test_payments_are_declined_one_in_ten_and_left_unknown_one_in_twenty_five():
    outcomes = {n: clients.pay(n) for n in range(1, 1001)}
    assert {n for n, o in outcomes.items() if o == "UNKNOWN"} == {
        n for n in outcomes if n % clients.UNKNOWN_EVERY == 7}
    assert {n for n, o in outcomes.items() if o == "ROLLBACK"} == {
        n for n in outcomes if n % clients.DECLINED_EVERY == 3}
    assert set(outcomes.values()) == {"COMMIT", "ROLLBACK", "UNKNOWN"}
    assert (clients.pay(1), clients.pay(3), clients.pay(7), clients.pay(32)) == (
        "COMMIT", "ROLLBACK", "UNKNOWN", "UNKNOWN")


def test_the_bank_answers_a_check_back_by_the_orders_number():
    assert clients.bank_says(message("order-7")) == "COMMIT"  # odd: paid meanwhile
    assert clients.bank_says(message("order-10")) == "ROLLBACK"
    assert clients.bank_says(message(None)) == "ROLLBACK"  # no order: nothing was paid
    assert clients.bank_says(message("order-")) == "ROLLBACK"


def test_the_ledger_counts_a_receipt_that_came_before_its_payment(caplog):
    ledger = clients.Ledger()
    for body in (b"paid order-1", b"receipt order-1", b"paid order-2"):
        ledger(message("x", body))
    assert ledger.out_of_order == 0 and ledger.paid == {"order-1", "order-2"}
    with caplog.at_level(logging.ERROR, logger="floodgate.demo.clients"):
        ledger(message("x", b"receipt order-9"))
    assert ledger.out_of_order == 1
    assert "ledger: receipt of order-9 before its payment" in caplog.text


def test_the_warehouse_fails_an_order_once_each_two_hundred_and_always_each_thousand():
    assert clients.fails(message("order-200"))  # first delivery: failed, sent back
    assert not clients.fails(message("order-200", retried=1))  # its retry is processed
    assert clients.fails(message("order-1000")) and clients.fails(message("order-3000",
                                                                          retried=2))
    assert not clients.fails(message("order-201"))
    for keys in (None, "", "order-", "order-x1", "invoice-200"):  # not the demo's keys
        assert not clients.fails(message(keys)), keys


def test_the_script_phases_cover_the_cycle_back_to_back():
    phases = clients.script_phases()
    assert phases[0][0] == 0.0 and phases[-1][1] == CYCLE_S
    assert all(a[1] == b[0] for a, b in zip(phases, phases[1:], strict=False))  # no gap, no overlap
    assert [share for *_, share in phases] == [s for _, s in clients.WAREHOUSE_SCRIPT]


def test_processing_time_at_the_phase_edges_and_without_a_rate():
    script = clients.WAREHOUSE_SCRIPT
    assert clients.processing_time(script, 19.999, 1000) == 0.0
    assert clients.processing_time(script, 20.0, 1000) == pytest.approx(1 / 600)
    assert clients.processing_time(script, 50.0, 1000) is None  # a hang starts on time
    assert clients.processing_time(script, 62.0, 1000) == 0.0
    assert clients.processing_time(script, 30.0, 0) == 0.0  # no rate known: no delay
    assert clients.processing_time(script, 55.0, 0) is None  # but a hang is a hang
    late = ((10.0, 0.5), (20.0, math.inf))  # before its first phase: the first phase's share
    assert clients.processing_time(late, 5.0, 100) == pytest.approx(1 / 50)


def test_the_floods_quota_admits_half_of_it_split_over_the_brokers_that_take_sends(tmp_path):
    single = ClusterFile("c", single_entries(4, 20000, tmp_path, "127.0.0.1"))
    assert clients.batch_quota(single) == {"kind": "group", "target": clients.BATCH_GROUP,
                                           "rate": 12.5, "burst": 1.25}
    # replicated: only the groups' masters take sends, 2 groups of 2 brokers
    replicated = ClusterFile("c", group_entries(2, 2, 20000, tmp_path, "127.0.0.1"),
                             zk="127.0.0.1:1")
    assert clients.batch_quota(replicated)["rate"] == 25.0
    assert clients.batch_quota(single, offered=4.0) == {
        "kind": "group", "target": clients.BATCH_GROUP, "rate": 0.5, "burst": 1.0}  # a floor


# --- the clients process, against a real broker ---------------------------------------

def committed(http: str, group: str, topic: str) -> int:
    from broker_core.client.admin import offsets

    doc = offsets(http, "GET", query={"group": group, "topic": topic})
    return sum(q["committed"] for q in doc["queues"])


@pytest.mark.integration
def test_the_clients_process_consumes_floods_pays_and_stops_on_sigterm(cluster_factory, tmp_path):
    from broker_core.client.admin import ensure_topic, quota
    from broker_core.client.consumer import Consumer
    from broker_core.client.loadgen import STAMP
    from broker_core.client.producer import Producer

    cluster = cluster_factory(n=1)
    http = cluster.file.brokers[0].http
    ensure_topic(cluster.file.addrs, clients.TOPIC)  # the runner's, before its clients
    ensure_topic(cluster.file.addrs, clients.PAY_TOPIC)  # for the test's own reader
    with Producer(cluster.file.addrs, fuse=False) as p:  # the demo's load, stamped
        for n in range(1, 21):
            p.send(clients.TOPIC, STAMP.pack(time.time()) + b"x" * 8, keys=f"order-{n}")
    log = tmp_path / "clients.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "console.demo.clients", str(cluster.path),
                                 "--rate=1000", "--nice=3"], stdout=out,
                                stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        # the flood's quota on the broker, and sends refused by it
        mine = wait_for(lambda: [q for q in quota(http)["quotas"]
                                 if q["target"] == clients.BATCH_GROUP], 20, "the quota")
        assert psutil.Process(proc.pid).nice() == 3  # --nice: below the demo's load
        assert {k: mine[0][k] for k in ("kind", "rate", "burst")} == {
            "kind": "group", "rate": 50.0, "burst": 5.0}
        throttled = wait_for(lambda: quota(http)["throttled"], 20, "refused sends")
        assert {(t["topic"], t["group"]) for t in throttled} == {
            (clients.BATCH_TOPIC, clients.BATCH_GROUP)}
        # both groups consumed the load and committed it, riding their pulls
        for group in ("billing", clients.WAREHOUSE_GROUP):
            wait_for(lambda g=group: committed(http, g, clients.TOPIC) == 20, 20,
                     f"{group} committed the load")
        # payments: read as another group would
        seen: list[Message] = []
        with Consumer("auditor", clients.PAY_TOPIC, cluster.file.addrs) as auditor:
            def receipts() -> bool:
                seen.extend(auditor.poll(64, timeout=0.2))
                return sum(m.body.startswith(b"receipt") for m in seen) >= 5
            wait_for(receipts, 20, "five receipts")
        assert proc.poll() is None, log.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(20)
        finally:
            proc.kill()
    assert code == 0, log.read_text()
    text = log.read_text()
    assert "Traceback" not in text and "before its payment" not in text, text
    bodies = [m.body.decode() for m in seen]
    paid = {b.split()[1] for b in bodies if b.startswith("paid ")}
    receipt = {b.split()[1] for b in bodies if b.startswith("receipt ")}
    declined = {f"order-{n}" for n in range(1, 200) if clients.pay(n) == "ROLLBACK"}
    unknown = {f"order-{n}" for n in range(1, 200) if clients.pay(n) == "UNKNOWN"}
    assert paid and not paid & declined  # a rolled back payment is never delivered
    assert receipt <= paid and not receipt & (declined | unknown)  # receipts of commits only
    for m in seen:  # by order id to one queue, the payment first
        if m.body.startswith(b"receipt"):
            first = next(p for p in seen if p.body == b"paid " + m.body[8:])
            assert (first.queue_id, first.queue_offset < m.queue_offset) == (m.queue_id, True)
    # what the groups consumed stayed committed, and each first delivery was timed
    assert committed(http, "billing", clients.TOPIC) == 20
    assert committed(http, clients.LEDGER_GROUP, clients.PAY_TOPIC) > 0
    delays = json.loads((cluster.data / "consumer_delay.json").read_text())
    for group in ("billing", clients.WAREHOUSE_GROUP):
        assert sum(h["count"] for h in delays[group].values()) == 20, delays
