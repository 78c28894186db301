"""Ordered messages end to end: order per key under consumers joining and leaving and
a master failover, and what orderly consumption costs.

1. Order. `--messages` (default 1,000,000) ordered sends over `--keys` (10,000) keys
   to 2 replicated groups (master + slave, sync replication, their own ZooKeeper),
   each key's messages sent one after another (seq 0, 1, 2 ...: the next only once the
   last is acknowledged; a failed send is sent again until it is). Four orderly
   consumer processes of one group each live 3-8 s, close, and come back 0.5-2 s
   later, the whole time; a third of the way through, group-1's master is SIGKILLed
   (it comes back as a slave). Every handled message is journaled (key, seq, start,
   end, queue, consumer) and checked: an order violation is a key's message handled
   before one sent earlier that was not handled yet (a redelivery of what came
   before is at-least-once, counted as a duplicate, not a violation); two consumers
   inside one queue at once; a message never handled. Goal: 0, 0, 0.
2. Cost. `--tput` (100,000) messages in one topic drained by one normal consumer and
   by one orderly consumer (each of its own group, three times, alternating; medians). Goal: the
   orderly one at >= 50 % of the normal one's rate.

    .venv/bin/python bench/ordered.py [--messages 1000000] [--keys 10000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import cluster_peak_rss_mib, peak_rss_mib  # noqa: E402

from broker_core.client.attempts import SendFailed  # noqa: E402
from broker_core.client.consumer import Consumer  # noqa: E402
from broker_core.client.producer import Producer  # noqa: E402
from broker_core.cluster.cluster_file import load_cluster  # noqa: E402
from broker_core.cluster.launcher import Cluster  # noqa: E402
from broker_core.cluster.ports import free_port_range  # noqa: E402
from broker_core.cluster.roles import group_records  # noqa: E402
from broker_core.ha.routes import routes_for  # noqa: E402

TOPIC, GROUP = "orders", "billing"
CONSUMERS = 4
SENDERS = 4


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- a consumer process ----------------------------------------------------------------
def consumer_main(cluster_file: str, name: str, life_s: float, journal: str) -> int:
    spec = load_cluster(Path(cluster_file))
    routes = routes_for(spec)
    routes.wait()
    lines: list[str] = []
    consumer = Consumer(GROUP, TOPIC, routes=routes, client_id=name, orderly=True)

    def handle(m) -> None:
        t0 = time.time()
        key, seq = m.body.split(b" ", 1)
        q = consumer.pulls.queue_of(m)  # the bench's journal names the queue
        lines.append(f"{key.decode()} {int(seq)} {t0:.6f} {time.time():.6f} "
                     f"{q[0]}:{q[1]} {name}\n")

    stop = threading.Event()
    threading.Timer(life_s, stop.set).start()
    consumer.consume(handle, timeout=0.2, stop=stop)
    consumer.close()
    routes.close()
    Path(journal).write_text("".join(lines))
    return 0


# -- the run ---------------------------------------------------------------------------
def send_all(routes, keys: int, per_key: int, stop: threading.Event, acked: list) -> None:
    def sender(t: int) -> None:
        with Producer(routes=routes, fuse=False, timeout=2.0) as p:
            mine = range(t, keys, SENDERS)
            for seq in range(per_key):
                for k in mine:
                    body = b"k%d %d" % (k, seq)
                    while not stop.is_set():
                        try:
                            p.send(TOPIC, body, order_key=f"k{k}")
                            break
                        except SendFailed:
                            time.sleep(0.2)  # its group fails over: the same seq again
                    acked[t] += 1

    threads = [threading.Thread(target=sender, args=(t,), daemon=True) for t in range(SENDERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_consumers(cluster_file: Path, journals: Path, stop: threading.Event) -> None:
    def slot(i: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            life = random.uniform(3, 8)
            proc = subprocess.Popen([sys.executable, __file__, "--consumer", str(cluster_file),
                                     f"c{i}-{n}", f"{life:.1f}",
                                     str(journals / f"c{i}-{n}.txt")])
            proc.wait()
            stop.wait(random.uniform(0.5, 2.0))

    threads = [threading.Thread(target=slot, args=(i,), daemon=True) for i in range(CONSUMERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def check(journals: Path, keys: int, per_key: int) -> dict:
    rows = []
    for f in journals.glob("*.txt"):
        for line in f.read_text().splitlines():
            key, seq, t0, t1, queue, name = line.split()
            rows.append((float(t0), float(t1), key, int(seq), queue, name))
    rows.sort()
    top: dict[str, int] = defaultdict(lambda: -1)
    violations, duplicates = 0, 0
    handled: dict[str, set] = defaultdict(set)
    for _t0, _t1, key, seq, _q, _n in rows:
        if seq > top[key] + 1:
            violations += 1
        elif seq <= top[key]:
            duplicates += 1
        top[key] = max(top[key], seq)
        handled[key].add(seq)
    overlaps = 0
    by_queue: dict[str, list] = defaultdict(list)
    for t0, t1, _k, _s, queue, name in rows:
        by_queue[queue].append((t0, t1, name))
    for spans in by_queue.values():
        end, owner = 0.0, None
        for t0, t1, name in spans:
            if t0 < end and name != owner:
                overlaps += 1
            if t1 > end:
                end, owner = t1, name
    missing = sum(per_key - len(handled.get(f"k{k}", ())) for k in range(keys))
    return {"handled": len(rows), "order_violations": violations, "duplicates": duplicates,
            "queue_overlaps": overlaps, "never_handled": missing,
            "consumer_processes": len(list(journals.glob("*.txt"))),
            "consumers_seen": len({r[5] for r in rows})}


def order_run(data: Path, messages: int, keys: int) -> dict:
    per_key = max(1, messages // keys)
    c = Cluster(0, free_port_range(3 * 4 + 1), data / "order", segment_size="256M",
                name=f"ordered-{os.getpid()}", groups=2, replicas=2, replication="sync")
    c.up(timeout=90)
    stop_sup = threading.Event()
    sup = threading.Thread(target=c.supervise, args=(stop_sup.is_set, True), daemon=True)
    sup.start()
    routes = routes_for(c.file)
    routes.wait()
    journals = data / "journals"
    journals.mkdir()
    stop = threading.Event()
    acked = [0] * SENDERS
    consumers = threading.Thread(target=run_consumers, args=(c.path, journals, stop))
    consumers.start()
    t0 = time.monotonic()
    sending = threading.Thread(target=send_all, args=(routes, keys, per_key, threading.Event(),
                                                      acked))
    sending.start()
    killed = None
    while sending.is_alive():
        sending.join(1.0)
        done = sum(acked)
        if killed is None and done >= keys * per_key / 3:
            killed = group_records(c.file)["group-1"].master
            say(f"  {done:,} acked: SIGKILL of {killed}, group-1's master")
            os.kill(c.procs[killed].pid, signal.SIGKILL)
        elif int(time.monotonic() - t0) % 30 == 0:
            say(f"  {done:,} acked")
    send_s = time.monotonic() - t0
    say(f"  all {keys * per_key:,} acked in {send_s:.0f} s; draining")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # until every message was handled once
        time.sleep(5)
        seen = check(journals, keys, per_key)
        say(f"  handled {seen['handled']:,}, never handled yet {seen['never_handled']:,}")
        if seen["never_handled"] == 0:
            break
    stop.set()
    consumers.join(60)
    result = check(journals, keys, per_key)
    routes.close()
    stop_sup.set()
    rss = cluster_peak_rss_mib(c)
    c.down()
    return {"messages": keys * per_key, "keys": keys, "send_s": round(send_s, 1),
            "killed_master": killed, "broker_peak_rss_mib": rss, **result}




def drain_rate(addrs: dict, group: str, orderly: bool, total: int) -> float:
    """Messages handled a second, from the first one handled to the last (joining the
    group and taking the locks are not the rate)."""
    got, first = 0, 0.0
    done = threading.Event()

    def handle(_m) -> None:
        nonlocal got, first
        if not got:
            first = time.monotonic()
        got += 1
        if got >= total:
            done.set()

    consumer = Consumer(group, "tput", addrs, orderly=orderly, retry=False)
    t = threading.Thread(target=consumer.consume, args=(handle,),
                         kwargs={"timeout": 0.1, "stop": done}, daemon=True)
    t.start()
    done.wait(300)
    took = time.monotonic() - first
    t.join(10)
    consumer.close()
    return (got - 1) / took


def cost_run(data: Path, total: int) -> dict:
    c = Cluster(1, free_port_range(2), data / "tput", segment_size="256M",
                name=f"tput-{os.getpid()}")
    c.up()
    addrs = c.file.addrs
    with Producer(addrs, fuse=False) as p:
        for i in range(0, total, 500):
            for q in range(4):  # every queue: the orderly consumer owns all four
                p.send_batch("tput", [b"m%d" % j for j in range(i + q, i + 500, 4)])
    rates: dict[str, list[float]] = {"normal": [], "orderly": []}
    for run in range(3):  # alternating: a noisy neighbour's minute hits both
        for kind in ("normal", "orderly"):
            rate = drain_rate(addrs, f"{kind}-{run}", kind == "orderly", total)
            rates[kind].append(rate)
            say(f"  {kind}: {rate:,.0f} msgs/s")
    c.down()
    normal, orderly = statistics.median(rates["normal"]), statistics.median(rates["orderly"])
    return {"messages": total, "normal_msgs_s": round(normal), "orderly_msgs_s": round(orderly),
            "ratio": round(orderly / normal, 2)}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--consumer":
        return consumer_main(*sys.argv[2:4], float(sys.argv[4]), sys.argv[5])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--tput", type=int, default=100_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ordered-") as tmp:
        data = Path(tmp)
        say(f"order: {args.messages:,} messages over {args.keys:,} keys, {CONSUMERS} orderly "
            f"consumers coming and going, one master SIGKILLed")
        order = order_run(data, args.messages, args.keys)
        say(f"cost: {args.tput:,} messages drained by a normal and an orderly consumer")
        cost = cost_run(data, args.tput)
    doc = {"order": order, "cost": cost, "bench_peak_rss_mib": round(peak_rss_mib(), 1),
           "goals": {"order_violations": order["order_violations"] == 0,
                     "queue_overlaps": order["queue_overlaps"] == 0,
                     "never_handled": order["never_handled"] == 0,
                     "orderly_at_least_half": cost["ratio"] >= 0.5}}
    print(json.dumps(doc, indent=2) if args.json else
          f"order: {order}\ncost: {cost}\ngoals: {doc['goals']}")
    return 0 if all(doc["goals"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
