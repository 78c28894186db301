"""The demo's other clients, in a process of their own (so they cost the demo's
producer, and its fuse, no GIL time): two consumer groups on the demo topic
and a flooding producer group held back by a quota.

- `billing` consumes at full speed the whole time;
- `warehouse` follows `WAREHOUSE_SCRIPT` every cycle: it slows down below the
  demo's rate (its lag grows: WARNING), then hangs while still heartbeating
  (STALLED), then recovers and drains its backlog while `billing` never falls
  behind (the Taobao talk: one group's backlog must not delay another's);
  It also fails some messages (`fails`): one in FAIL_EVERY once (retried after
  RETRY_DELAY and then processed), one in DEAD_EVERY every time (retried
  MAX_RECONSUME times, then in its dead-letter queue: the console's alert,
  `floodgate dlq show --group warehouse`);
- `demo-batch` offers `BATCH_RATE` msgs/s against quotas that admit half of it
  (`batch_quota`), so brokers answer FLOW_CONTROL and the producer backs off once;
- `payments` publishes "paid order-N" transactionally at PAY_RATE (one in
  DECLINED_EVERY declined: rolled back; one in UNKNOWN_EVERY left UNKNOWN, settled
  by the broker's check-back), then a "receipt order-N", both by order id to one
  queue; `ledger` books each into `demo-ledger` exactly once (client.transform: queue
  locks, its output and offsets committed together; the console marks the group) and
  counts a receipt that came before its payment (never, if order holds).

Both groups report their deliveries to the message trace at `--trace-rate`.

Run by `console.demo.runner` as `python -m console.demo.clients CLUSTER_FILE
[--trace-rate=R] [--rate=R] [--users=DIR]`;
it stops on SIGTERM, committing what it consumed.
"""

from __future__ import annotations

import gc
import logging
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path

from broker_core.errors import BrokerError
from console.demo.delays import Delays
from console.demo.script import CYCLE_S  # its consumer groups' cycle is the faults'
from console.logs import configure_logging

log = logging.getLogger("floodgate.demo.clients")

TOPIC = "demo"
BATCH_TOPIC = "demo-batch"
BATCH_GROUP = "demo-batch"
BATCH_RATE = 100.0  # offered, msgs/s
BATCH_ADMITTED = 0.5  # of BATCH_RATE, over all the brokers that take sends
BATCH_FLOW_RETRIES = 1  # one backoff, then give up: the demo shows refusals, not a retry storm
# RocketMQ's pull batch (the RocketMQ design talk): a broker answers a pull on the loop its sends wait
# on, and 256 messages at a time held them for milliseconds
PULL_BATCH = 32
NICE = 10  # below the brokers and the load: see runner.CONSOLE_NICE
COMMIT_S = 0.5  # the brokers judge offsets every second: commit more often than that
FAIL_EVERY = 200  # warehouse fails order-N once when N is a multiple ...
DEAD_EVERY = 1000  # ... and every time when N is a multiple of this: a dead letter
RETRY_DELAY = "5s"  # a level: the retries show up in the demo's first minutes
MAX_RECONSUME = 2
WAREHOUSE_GROUP = "warehouse"  # the group that follows WAREHOUSE_SCRIPT
# (seconds into the cycle, what the group processes as a share of the demo's rate:
# inf = as fast as it pulls, 0 = hangs). A share, not a time per message: at 0.6 ms a
# message (1,600/s) the demo's 1,000 msgs/s never made a lag, so WARNING never showed
WAREHOUSE_SCRIPT: tuple[tuple[float, float], ...] = (
    (0.0, math.inf),
    (20.0, 0.6),  # slows below the rate: its lag grows (WARNING)
    (50.0, 0.0),  # hangs, still heartbeating: STALLED
    (62.0, math.inf),  # recovers: drains its backlog
)


# The side stories (the flood, the payments, the RocketMQ application) at the rates above
# for a demo at STORY_AT msgs/s or more, and in proportion below (not under their
# floors): a demo at 10 msgs/s told them at 100, 20 and 10 a second, thirteen times its
# own load (the RocketMQ application's gRPC calls alone a third of its fixed cost).
STORY_AT = 1000.0
RMQ_RATE = 10.0  # the RocketMQ application (console.demo.rocketmq_clients): beside the
# flood, not part of it
BATCH_FLOOR, PAY_FLOOR, RMQ_FLOOR = 4.0, 1.0, 1.0


def story_rates(rate: float) -> tuple[float, float, float]:
    """(the flood's offered msgs/s, payments a second, the RocketMQ application's msgs/s)
    for a demo at `rate` msgs/s (0: the full story)."""
    scale = 1.0 if rate <= 0 else min(1.0, rate / STORY_AT)
    return (max(BATCH_FLOOR, BATCH_RATE * scale), max(PAY_FLOOR, PAY_RATE * scale),
            max(RMQ_FLOOR, RMQ_RATE * scale))


PAY_TOPIC = "demo-paid"
PAY_GROUP = "payments"  # the transactional producer group the brokers ask back
LEDGER_GROUP = "ledger"  # the exactly-once transform's group (its queues locked)
LEDGER_TOPIC = "demo-ledger"  # what it books, one entry per payment event
PAY_RATE = 20.0  # orders paid a second: the story, not the load
DECLINED_EVERY = 10  # order-N with N % 10 == 3: the card is declined (rolled back)
UNKNOWN_EVERY = 25  # N % 25 == 7: the bank has not answered (UNKNOWN: checked back)


def pay(n: int) -> str:
    """The payment's local transaction for order-N."""
    if n % UNKNOWN_EVERY == 7:
        return "UNKNOWN"
    return "ROLLBACK" if n % DECLINED_EVERY == 3 else "COMMIT"


def bank_says(msg) -> str:
    """The check-back: the bank answered meanwhile (odd orders paid, even declined)."""
    n = int((msg.keys or "order-0")[6:] or 0)
    return "COMMIT" if n % 2 else "ROLLBACK"


def payments(tx, stop: threading.Event, rate: float = PAY_RATE) -> None:
    """Pay an order every 1/`rate` s: the paid event transactionally, then its receipt
    (only for a committed payment), both to the order's queue."""
    from broker_core.client.attempts import SendFailed

    n = 0
    while not stop.wait(1.0 / rate):
        n += 1
        order = f"order-{n}"
        try:
            result = tx.send_in_transaction(PAY_TOPIC, b"paid " + order.encode(),
                                            lambda _m, n=n: pay(n), keys=order, order_key=order)
            if result.state == "COMMIT" and result.ended:
                tx.producer.send(PAY_TOPIC, b"receipt " + order.encode(), keys=order,
                                 order_key=order)
        except (SendFailed, BrokerError):  # a failover: the next order goes on
            continue
    tx.close()


class Ledger:
    """The `ledger` transform: each payment event booked (its output), and a receipt
    must follow its payment. Run again on a batch a failover cut short: idempotent."""

    def __init__(self) -> None:
        self.paid: set[str] = set()
        self.out_of_order = 0

    def __call__(self, m) -> None:
        kind, order = m.body.decode().split(" ", 1)
        if kind == "paid":
            self.paid.add(order)
        elif order not in self.paid:
            self.out_of_order += 1
            log.error("ledger: receipt of %s before its payment", order)
        return b"booked " + m.body


def ledger(transform, stop: threading.Event) -> None:
    transform.run(stop, timeout=0.5)
    transform.close()


def script_phases(script=WAREHOUSE_SCRIPT) -> list[tuple[float, float, float]]:
    """(from, until, share) for each phase of the script, in cycle seconds."""
    ends = [start for start, _share in script[1:]] + [CYCLE_S]
    return [(start, end, share) for (start, share), end in zip(script, ends, strict=True)]


def script_story(script=WAREHOUSE_SCRIPT) -> str:
    """The script in words, for the console's opening note and the headless summary:
    "falls behind at 20 s (60 % of the rate: WARNING), hangs 50-62 s (STALLED), then
    drains"."""
    parts = []
    for start, end, share in script_phases(script):
        if share == 0:
            parts.append(f"hangs {start:g}-{end:g} s (STALLED)")
        elif not math.isinf(share):
            parts.append(f"falls behind at {start:g} s ({share * 100:g} % of the rate: WARNING)")
    return ", ".join(parts) + ", then drains"


def processing_time(script, at: float, rate: float) -> float | None:
    """The warehouse group's time a message `at` seconds into the cycle, the demo's
    producer sending `rate` msgs/s (None: it hangs)."""
    share = script[0][1]
    for start, value in script:
        if at >= start:
            share = value
    if share == 0:
        return None
    return 0.0 if math.isinf(share) or rate <= 0 else 1.0 / (share * rate)


def fails(message) -> bool:
    """Does the warehouse's handler fail this message (this time)?"""
    from broker_core.client.retry import retry_times

    keys = message.keys or ""
    if not keys.startswith("order-") or not keys[6:].isdigit():
        return False
    n = int(keys[6:])
    return n % DEAD_EVERY == 0 or (n % FAIL_EVERY == 0 and retry_times(message) == 0)


def consume(consumer, stop: threading.Event, script=None, started: float = 0.0,
            rate: float = 0.0, delays=None) -> None:
    """Poll, 'process', commit every COMMIT_S until `stop`; follow `script` if given at
    the demo's `rate` (and then fail what `fails` says: sent back for a retry).
    `delays` (console.demo.delays): send -> in hand of each first delivery counted."""
    from broker_core.client.retry import retry_times

    last_commit = time.monotonic()
    while not stop.is_set():
        per_msg = processing_time(script, (time.monotonic() - started) % CYCLE_S, rate) \
            if script else 0.0
        if per_msg is None:  # hung: alive (heartbeats) but not moving
            consumer.heartbeat()
            stop.wait(1.0)
            continue
        msgs = consumer.poll(PULL_BATCH, timeout=0.5)
        if delays is not None and msgs:
            delays.record(consumer.group, [m for m in msgs if not retry_times(m)])
        if script:
            for m in msgs:
                if fails(m):
                    try:
                        consumer.nack(m)
                    except BrokerError:  # not sent back (a failover): it comes again
                        break
        if msgs and per_msg:
            stop.wait(per_msg * len(msgs))
        if time.monotonic() - last_commit >= COMMIT_S:
            consumer.commit(wait=False)  # riding the next pulls: no round trips
            last_commit = time.monotonic()
    consumer.close()


def flood(producer, stop: threading.Event, rate: float = BATCH_RATE) -> None:
    """Offer `rate` msgs/s without waiting for answers; throttled sends back off."""
    interval, sent = 1.0 / rate, 0
    start = time.monotonic()
    while not stop.is_set():
        due = start + sent * interval
        wait = due - time.monotonic()
        if wait > 0:
            stop.wait(wait)
            continue
        producer.send_async(BATCH_TOPIC, b"b" * 128).add_done_callback(_ignore)
        sent += 1
    producer.close()


def _ignore(fut) -> None:
    fut.exception()  # a send out of backoffs is counted by the producer; nothing to do here


def batch_quota(spec, offered: float = BATCH_RATE) -> dict:
    """Each broker's share of what the batch group may send: sends go to every broker
    (or, replicated, every group's master), so the quota is split over those."""
    carriers = len(spec.groups) if spec.replicated else len(spec.brokers)
    rate = offered * BATCH_ADMITTED / max(1, carriers)
    return {"kind": "group", "target": BATCH_GROUP, "rate": rate, "burst": max(1.0, rate / 10)}


# The clients by process: the group that keeps up alone, so that its messages reach it
# in a few ms (sharing a GIL with a group draining its backlog, its p99 was 25-80 ms at
# 5,000 msgs/s: the Mogujie talk's fast and slow consumers treated apart); the rest.
PARTS = {"fast": ("billing",), "rest": ("warehouse", "batch", "payments", "ledger")}


def run(cluster_path: Path, stop: threading.Event, trace_rate: float = 0.0,
        users: Path | None = None, rate: float = 0.0, part: str | None = None,
        rocketmq: bool = False) -> None:
    """`users`: the ACL's credentials files, one per client (console.demo.users);
    `rate`: the demo producer's, which the warehouse group's script falls behind;
    `part`: one of PARTS (None: every client); `rocketmq`: with the rest, the RocketMQ
    application (console.demo.rocketmq_clients)."""
    from broker_core.client.admin import ensure_topic, quota
    from broker_core.client.consumer import Consumer
    from broker_core.client.producer import Producer
    from broker_core.client.transaction import TransactionProducer
    from broker_core.client.transform import Transform
    from broker_core.cluster.cluster_file import load_cluster

    spec = load_cluster(cluster_path)
    routes = None
    if spec.replicated:
        from broker_core.ha.routes import routes_for

        routes = routes_for(spec)
        ensure_topic(routes.wait(), BATCH_TOPIC)
    else:
        ensure_topic(spec.addrs, BATCH_TOPIC)
    flood_rate, pay_rate, rmq_rate = story_rates(rate)
    delays = Delays(cluster_path.parent, part).start()
    if part is None or "batch" in PARTS[part]:
        for b in spec.brokers:  # every broker: a slave promoted later enforces it too
            quota(b.http, "POST", batch_quota(spec, flood_rate))
    brokers = None if routes is not None else spec.addrs
    started = time.monotonic()

    def as_user(name: str):
        if users is None:
            return None
        from broker_core.acl.credentials import load

        return load(users / f"{name}.toml")

    makers = {
        "billing": lambda: (consume, Consumer(
            "billing", TOPIC, brokers, routes=routes, trace_rate=trace_rate,
            credentials=as_user("billing")), None),
        "warehouse": lambda: (consume, Consumer(
            WAREHOUSE_GROUP, TOPIC, brokers, routes=routes, trace_rate=trace_rate,
            retry_delay=RETRY_DELAY, max_reconsume=MAX_RECONSUME,
            credentials=as_user(WAREHOUSE_GROUP)), WAREHOUSE_SCRIPT),
        # no fuse: this producer's story is its quota, and a fuse's housekeeping thread
        # cost more than its 100 sends a second
        "batch": lambda: (flood, Producer(
            brokers, routes=routes, group=BATCH_GROUP, fuse=False,
            flow_retries=BATCH_FLOW_RETRIES, credentials=as_user("batch")), None),
        # the receipt follows only a commit the broker took: a COMMIT sent one way and lost
        # (an injected error) is settled by a check-back seconds later, after the receipt
        "payments": lambda: (payments, TransactionProducer(
            PAY_GROUP, brokers, check=bank_says, routes=routes, fuse=False,
            credentials=as_user("payments"), end_oneway=False), None),
        # its halves left by a failover are rolled back by a check-back: asked every 5 s
        "ledger": lambda: (ledger, Transform(
            LEDGER_GROUP, PAY_TOPIC, LEDGER_TOPIC, Ledger(), brokers, routes=routes,
            credentials=as_user("ledger"), fuse=False, poll_s=5.0), None),
    }
    names = PARTS[part] if part is not None else tuple(makers)
    workers = [makers[name]() for name in names]
    threads = []
    for fn, client, script in workers:
        if fn is flood:
            args = (client, stop, flood_rate)
        elif fn is payments:
            args = (client, stop, pay_rate)
        elif fn is ledger:
            args = (client, stop)
        else:
            args = (client, stop, script, started, rate, delays)
        t = threading.Thread(target=fn, args=args, daemon=True, name=f"demo-{fn.__name__}")
        t.start()
        threads.append(t)
    grpc_ports = [b.grpc for b in spec.brokers if b.grpc]
    if rocketmq and grpc_ports and (part is None or part == "rest"):  # a RocketMQ application beside
        from console.demo import rocketmq_clients  # (its own protocol, its own user)

        threads += rocketmq_clients.start(grpc_ports, stop, as_user("rocketmq"), delays,
                                          rmq_rate)
    stop.wait()
    for t in threads:
        t.join(5)
    delays.close()
    if routes is not None:
        routes.close()


def main(argv: list[str]) -> int:
    configure_logging(logging.WARNING)  # to clients.log, as the brokers' lines read

    def option(name: str, default=None):
        return next((a.split("=", 1)[1] for a in argv[1:] if a.startswith(f"--{name}=")),
                    default)

    # the demo's producer and brokers come first on a small host: these clients show
    # backlog and throttling, and a late producer would blur the fuse's story
    from kernel_tuning.realtime import set_idle_class, set_realtime

    realtime = option("realtime")  # the group that keeps up, beside the brokers: see
    if realtime is not None:       # runner.BROKER_RT_PRIORITY
        refused = set_realtime(int(realtime))
        if refused:
            log.warning("SCHED_RR %s refused: %s", realtime, refused)
    else:
        nice = option("nice", str(NICE))
        if nice != "idle" or set_idle_class() is not None:  # idle: see runner.REST_SCHED
            os.nice(NICE if nice == "idle" else int(nice))
    gc.collect()
    gc.freeze()  # start-up's objects are not walked by every full collection
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    users = option("users")
    run(Path(argv[0]), stop, float(option("trace-rate", 0.0)),
        Path(users) if users else None, float(option("rate", 0.0)), option("part"),
        bool(option("rocketmq")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
