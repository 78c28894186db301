"""Transactional messages on a replicated cluster (2 groups of master + slave, sync
replication, their own ZooKeeper): what a transaction costs, how soon a commit is
visible, and that SIGKILLs of masters mid-transaction lose no commit and deliver
no rollback.

1. Cost. `--count` (3,000) plain sync sends and as many `send_in_transaction`s
   (local transaction: COMMIT at once), one producer thread each, alternating three
   times; and commit-to-visible: from the local transaction returning COMMIT to a
   consumer (already polling) handling the message. Goals: transactions at >= 50 %
   of plain sends' rate; commit-to-visible p99 <= 20 ms.
2. Kills. Transactions at `--rate` (200/s) for `--kills` x 8 s: 80 % COMMIT, 15 %
   ROLLBACK, 5 % UNKNOWN (the check-back then says COMMIT for odd numbers); every
   8 s the master of group-1 or group-2 (in turn) is SIGKILLed and comes back as a
   slave. The check-back answers what the local transaction decided (ROLLBACK for a
   half whose local transaction never ran: its send failed). Then every half must be
   settled and a fresh consumer group reads the topic. Goals: 0 committed lost,
   0 rolled back delivered, 0 halves rolled back for running out of check-backs.

    .venv/bin/python bench/transactions.py [--count 3000] [--kills 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import cluster_peak_rss_mib, peak_rss_mib  # noqa: E402

from broker_core.client.attempts import SendFailed  # noqa: E402
from broker_core.client.connection import Connection  # noqa: E402
from broker_core.client.consumer import Consumer  # noqa: E402
from broker_core.client.producer import Producer  # noqa: E402
from broker_core.client.transaction import TransactionProducer  # noqa: E402
from broker_core.cluster.launcher import Cluster  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402
from broker_core.cluster.roles import group_records  # noqa: E402
from broker_core.errors import BrokerError  # noqa: E402
from broker_core.ha.routes import routes_for  # noqa: E402
from broker_core.protocol import Code, Op, decode_json, encode_json  # noqa: E402
from heatmap import LatencyHistogram  # noqa: E402

CHECK_S = "1"  # the brokers' --tx-check-s: a killed producer's halves settle within seconds
KILL_EVERY_S = 8.0


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def rate_of(fn, n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - t0)


def cost(routes, count: int) -> dict:
    visible = LatencyHistogram()
    committing: dict[bytes, float] = {}
    stop = threading.Event()

    def handle(m) -> None:
        t = committing.pop(m.body, None)
        if t is not None:
            visible.record(time.monotonic() - t)

    rates: dict[str, list[float]] = {"plain": [], "tx": []}
    with Producer(routes=routes, fuse=False) as plain, \
            TransactionProducer("payments", routes=routes, fuse=False) as tx:
        for q in range(8):  # the topic on both groups, every queue: the consumer owns them
            plain.send("paid", b"warm-up", order_key=f"w{q}")
        consumer = Consumer("visible", "paid", routes=routes, retry=False)
        reader = threading.Thread(target=consumer.consume, args=(handle,),
                                  kwargs={"timeout": 0.05, "stop": stop}, daemon=True)
        reader.start()
        time.sleep(3)  # it joined and read the warm-up: commits are seen as they come

        def commit(body: bytes):
            def local(_m) -> str:
                committing[body] = time.monotonic()
                return "COMMIT"
            return local

        for run in range(3):
            rates["plain"].append(rate_of(lambda i, r=run: plain.send(
                "plain", b"p%d-%d" % (r, i)), count))
            rates["tx"].append(rate_of(lambda i, r=run: tx.send_in_transaction(
                "paid", b"t%d-%d" % (r, i), commit(b"t%d-%d" % (r, i))), count))
            say(f"  plain {rates['plain'][-1]:,.0f}/s, transactional {rates['tx'][-1]:,.0f}/s")
    time.sleep(2)
    stop.set()
    reader.join(10)
    consumer.close()
    plain_rate, tx_rate = statistics.median(rates["plain"]), statistics.median(rates["tx"])
    return {"plain_sends_s": round(plain_rate), "tx_s": round(tx_rate),
            "ratio": round(tx_rate / plain_rate, 2),
            "commit_to_visible_ms": {"p50": round(visible.quantile(0.5) * 1000, 2),
                                     "p99": round(visible.quantile(0.99) * 1000, 2),
                                     "max": round(visible.max * 1000, 2),
                                     "count": visible.count}}


def kills(c: Cluster, routes, n_kills: int, rate: float) -> dict:
    decided: dict[int, str] = {}  # seq -> what its local transaction said
    lock = threading.Lock()

    def decide(seq: int) -> str:
        r = seq % 20
        return "UNKNOWN" if r == 0 else "ROLLBACK" if r <= 3 else "COMMIT"

    def final(seq: int) -> str:
        d = decided.get(seq)
        if d is None:  # its local transaction never ran: nothing was paid
            return "ROLLBACK"
        return ("COMMIT" if seq % 2 else "ROLLBACK") if d == "UNKNOWN" else d

    def check(m) -> str:
        with lock:
            return final(int(m.body))

    stop = threading.Event()
    sent = [0, 0]  # attempted, failed sends

    def produce() -> None:
        with TransactionProducer("payments-k", routes=routes, check=check, fuse=False,
                                 timeout=2.0, poll_s=0.5) as tx:
            t0, seq = time.monotonic(), 0
            while not stop.is_set():
                wait = t0 + seq / rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                s = seq
                seq += 1
                sent[0] += 1

                def local(_m, s=s) -> str:
                    with lock:
                        decided[s] = decide(s)
                    return decided[s]

                try:
                    tx.send_in_transaction("kills", b"%d" % s, local)
                except (SendFailed, BrokerError):
                    sent[1] += 1
            # the halves left UNKNOWN or unsettled by a kill wait for their check-backs
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and pending(c) > 0:
                time.sleep(1)

    t = threading.Thread(target=produce)
    t.start()
    killed = []
    for k in range(n_kills):
        time.sleep(KILL_EVERY_S)
        group = f"group-{k % 2 + 1}"
        master = group_records(c.file)[group].master
        killed.append(master)
        say(f"  kill {k + 1}/{n_kills}: SIGKILL of {master} ({sent[0]:,} transactions so far)")
        os.kill(c.procs[master].pid, signal.SIGKILL)
    time.sleep(KILL_EVERY_S)
    stop.set()
    t.join()
    left = pending(c)
    expected = {s for s in decided if final(s) == "COMMIT"}
    rolled = {s for s in decided if final(s) == "ROLLBACK"}
    got: list[int] = []
    with Consumer("reader", "kills", routes=routes, retry=False) as reader:
        idle = time.monotonic()
        while time.monotonic() - idle < 5:
            msgs = reader.poll(256, timeout=0.5)
            if msgs:
                idle = time.monotonic()
            got += [int(m.body) for m in msgs]
    delivered = set(got)
    exhausted = sum(f.get("rolled_back", {}).get("checks-exhausted", 0) for f in figures(c))
    return {"kills": len(killed), "transactions": sent[0], "send_failures": sent[1],
            "local_tx_ran": len(decided), "committed_expected": len(expected),
            "rolled_back_expected": len(rolled), "delivered": len(got),
            "committed_lost": len(expected - delivered),
            "rolled_back_delivered": len(delivered & rolled),
            "delivered_without_a_local_commit": len(delivered - expected - rolled),
            "duplicates": len(got) - len(delivered), "halves_pending_at_end": left,
            "rolled_back_checks_exhausted": exhausted}


def figures(c: Cluster) -> list[dict]:
    out = []
    for b in c.file.brokers:
        try:
            conn = Connection(b.addr)
            code, body = conn.call(Op.LIST_TRANSACTIONS, encode_json({}), 5.0)
            conn.close()
        except (OSError, BrokerError, TimeoutError):
            continue
        if code == Code.OK:
            out.append(decode_json(body)["figures"])
    return out


def pending(c: Cluster) -> int:
    return sum(f.get("pending", 0) for f in figures(c))




def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tx-bench-") as tmp:
        c = Cluster(0, free_port_range(3 * 4 + 1), Path(tmp), segment_size="256M",
                    name=f"tx-{os.getpid()}", groups=2, replicas=2, replication="sync",
                    extra_args=["--tx-check-s", CHECK_S])
        c.up(timeout=90)
        stop_sup = threading.Event()
        threading.Thread(target=c.supervise, args=(stop_sup.is_set, True), daemon=True).start()
        routes = routes_for(c.file)
        routes.wait()
        try:
            say(f"cost: {args.count:,} plain sends and {args.count:,} transactions, x3")
            cost_doc = cost(routes, args.count)
            say(f"kills: transactions at {args.rate:g}/s, {args.kills} masters SIGKILLed")
            kill_doc = kills(c, routes, args.kills, args.rate)
        finally:
            routes.close()
            stop_sup.set()
            rss = cluster_peak_rss_mib(c)
            c.down()
    doc = {"cost": cost_doc, "kills": kill_doc, "broker_peak_rss_mib": rss,
           "bench_peak_rss_mib": round(peak_rss_mib(), 1),
           "goals": {"tx_at_least_half_of_plain": cost_doc["ratio"] >= 0.5,
                     "commit_to_visible_p99_20ms":
                         cost_doc["commit_to_visible_ms"]["p99"] <= 20,
                     "no_commit_lost": kill_doc["committed_lost"] == 0,
                     "no_rollback_delivered": kill_doc["rolled_back_delivered"] == 0,
                     "settled_within_15_checks": kill_doc["rolled_back_checks_exhausted"] == 0
                     and kill_doc["halves_pending_at_end"] == 0}}
    print(json.dumps(doc, indent=2) if args.json else
          f"cost: {cost_doc}\nkills: {kill_doc}\ngoals: {doc['goals']}")
    return 0 if all(doc["goals"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
