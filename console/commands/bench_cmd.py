"""`floodgate bench produce`: push load at brokers and report acked, errors, TPS, RT."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from console.commands.common import (
    STORED_SHORT,
    add_realtime_arg,
    add_subparser,
    float_range,
    int_range,
    nonneg_int,
    port,
    positive_float,
    positive_int,
    print_json,
    share,
    take_realtime,
)
from console.errors import CommandFailed, UsageError

MAX_BODY = 4 << 20  # what a broker stores at most (StoreConfig.max_message_bytes)


def register(sub) -> None:
    parser = add_subparser(sub, "bench", "load generators")
    bsub = parser.add_subparsers(metavar="ACTION")
    prod = add_subparser(bsub, "produce", "send messages and report TPS and RT percentiles")
    target = prod.add_mutually_exclusive_group(required=True)
    target.add_argument("--brokers", metavar="ADDR[,ADDR…]", help="broker TCP addresses")
    target.add_argument("--cluster", type=Path, metavar="FILE", help="cluster.toml")
    amount = prod.add_mutually_exclusive_group(required=True)
    amount.add_argument("--count", type=positive_int, help="messages to send")
    amount.add_argument("--duration", type=positive_float, metavar="S",
                        help="seconds to send for")
    prod.add_argument("--rate", type=positive_float,
                      help="messages per second (default: flat out)")
    prod.add_argument("--size", type=int_range(0, MAX_BODY), default=128, metavar="B",
                      help=f"body bytes, 0 (empty bodies) to {MAX_BODY} (128)")
    prod.add_argument("--batch", type=positive_int, default=1, metavar="K",
                      help="messages per request")
    prod.add_argument("--concurrency", type=positive_int, default=64, metavar="C",
                      help="requests in flight at most (default 64)")
    prod.add_argument("--topic", default="bench",
                      help="or several, comma-separated: each message to the next in turn")
    prod.add_argument("--timeout", type=positive_float, default=3.0,
                      help="per-request timeout, s")
    prod.add_argument("--send-deadline", type=float_range(0.001, 60), metavar="S",
                      help="each send's retry budget in seconds (Kafka's delivery.timeout.ms): "
                      "attempts until it passes (10 s)")
    prod.add_argument("--no-fuse", action="store_true", help="plain round robin, no fuse")
    prod.add_argument("--group", default="", help="producer group (what brokers' quotas see)")
    prod.add_argument("--flow-retries", type=nonneg_int, default=3, metavar="N",
                      help="tries again after FLOW_CONTROL, each after the broker's hint "
                      "(3; 0: never)")
    prod.add_argument("--backoff", default="", metavar="S[,S…]",
                      help="seconds to wait before the 1st, 2nd, … retry (the RocketMQ design talk's send "
                           "backoff; default: retry at once on another broker)")
    prod.add_argument("--trace-rate", type=share, default=0.0, metavar="R",
                      help="share of sends traced, 0..1 (default 0: none)")
    prod.add_argument("--key-prefix", default="", metavar="P",
                      help="key the n-th message P<n> (the key index: `floodgate trace --key`)")
    prod.add_argument("--start-at", type=positive_float, metavar="UNIX_TIME",
                      help="send the first message at this wall-clock time, connected and "
                           "signed in before (several generators starting together; past: "
                           "at once)")
    prod.add_argument("--linger-ms", type=float_range(0, 1000), default=0.0, metavar="MS",
                      help="a send waits this long, up to 1000, for others to share its frame "
                      "(Kafka's linger.ms; 0, the default: those of the same turn of the loop)")
    prod.add_argument("--frame-msgs", type=int_range(1, 1024), default=64, metavar="N",
                      help="a frame (SEND_MULTI) leaves once it holds N messages (64): with "
                      "--linger-ms, frames as full at a low rate as at a high one")
    prod.add_argument("--at-least-once", action="store_true",
                      help="no producer id on the sends: a retry whose first try was stored "
                      "is stored again (the default is idempotent: stored once)")
    prod.add_argument("--stamp", action="store_true",
                      help="each body starts with its send time (8 bytes, a big-endian "
                      "double of epoch seconds): consumers on this host time send -> in hand")
    prod.add_argument("--name", default="bench", help="the producer's name on its /stats")
    prod.add_argument("--http-port", type=port,
                      help="serve this producer's /metrics and /stats (fuse state) on this port")
    add_realtime_arg(prod, "a load generator")
    prod.add_argument("--json", action="store_true")
    prod.set_defaults(func=run_produce)


def brokers_from(args) -> dict[str, str]:
    from broker_core.client.producer import normalize_brokers
    from broker_core.cluster.cluster_file import load_cluster

    if getattr(args, "cluster", None):
        return load_cluster(args.cluster).addrs
    try:
        return normalize_brokers(args.brokers)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _routes(args):
    """A replicated cluster's routes (sends go to each group's master), or None."""
    from broker_core.cluster.cluster_file import load_cluster
    from broker_core.ha.routes import routes_for

    if not getattr(args, "cluster", None):
        return None
    spec = load_cluster(args.cluster)
    if not spec.replicated:
        return None
    routes = routes_for(spec)
    routes.wait()
    return routes


def run_produce(args) -> int:
    from broker_core.client.loadgen import LoadGenerator, LoadSpec
    from broker_core.client.producer import Producer
    from broker_core.client.producer_http import ProducerHttp

    if args.size * args.batch > MAX_BODY:  # the broker refuses the whole batch
        raise UsageError(f"--batch {args.batch} x --size {args.size} is over the "
                         f"{MAX_BODY} bytes a broker takes in one request")
    if args.stamp and args.size < 8:
        raise UsageError(f"--stamp writes 8 bytes into each body: --size must be >= 8, "
                         f"got {args.size}")
    from broker_core.names import topic_problem

    for topic in args.topic.split(","):  # said before any send
        if (problem := topic_problem(topic)) is not None:
            raise UsageError(f"--topic: {problem}")
        if topic.startswith("%"):
            raise UsageError(f"--topic {topic}: a system topic (%TRACE%, %RETRY%..., "
                             "%DLQ%...) takes no ordinary producer's messages")
    if args.start_at is not None and args.start_at > time.time() + 86400:  # a typo: ms?
        raise UsageError(f"--start-at {args.start_at:.0f} is more than a day away: a Unix time "
                         f"in seconds, as `date +%s` prints")
    try:
        backoff = tuple(float(x) for x in args.backoff.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"--backoff takes seconds separated by commas, not {args.backoff!r}")\
            from None
    if any(not 0 <= b <= 60 for b in backoff):
        raise UsageError(f"--backoff intervals must be within 0..60 s, got {args.backoff}")
    take_realtime(args, "floodgate.bench")
    routes = _routes(args)
    brokers = routes.masters() if routes is not None else brokers_from(args)
    producer = Producer(brokers, fuse=False if args.no_fuse else None, timeout=args.timeout,
                        routes=routes, group=args.group, flow_retries=args.flow_retries,
                        backoff=backoff, trace_rate=args.trace_rate,
                        idempotent=not args.at_least_once, deadline_s=args.send_deadline)
    gen = LoadGenerator(producer, LoadSpec(args.topic, args.size, args.count, args.duration,
                                           args.rate, args.batch, args.concurrency,
                                           args.key_prefix, args.start_at, args.stamp,
                                           args.linger_ms / 1000, args.frame_msgs))
    http = None
    if args.http_port:
        trace = producer.tracer.dispatcher if producer.tracer is not None else None
        http = ProducerHttp(producer.fuse, args.name, args.http_port, counters=producer.counters,
                            extra_stats=lambda: {"load": gen.recent_summary(), **(
                                {"trace": trace.figures()} if trace else {})}).start()
    signal.signal(signal.SIGTERM, lambda *_: gen.stop())
    try:
        result = gen.run().to_dict()
    except KeyboardInterrupt:
        gen.stop()
        result = gen.result.to_dict()
    finally:
        producer.close()
        if http:
            http.close()
        if routes is not None:
            routes.close()
    result["brokers"] = sorted(brokers)
    if not result["acked"]:  # RT figures of failures only: not one send was measured
        result.update({k: None for k in ("mean_s", "p50_s", "p99_s", "p999_s", "max_s")})
    result["flow_control"] = producer.counters.snapshot()
    if producer.tracer is not None:
        result["trace"] = producer.tracer.dispatcher.figures()
    if args.json:
        print_json(result)
    else:
        def ms(v):
            return "-" if v is None else f"{v * 1000:.2f} ms"

        if result["acked"]:
            print(f"acked {result['acked']:,}  errors {result['errors']:,}  "
                  f"{result['tps']:,.0f} msgs/s over {result['seconds']:.1f} s")
            print(f"RT p50 {ms(result['p50_s'])}  p99 {ms(result['p99_s'])}  "
                  f"p999 {ms(result['p999_s'])}  max {ms(result['max_s'])}")
        else:
            print(f"nothing acknowledged: {result['errors']:,} send(s) failed over "
                  f"{result['seconds']:.1f} s")
        for status, n in result["degraded"].items():
            print(f"  acked {status}: {n:,} ({STORED_SHORT.get(status, 'stored, not as asked')})")
        for reason, n in result["error_reasons"].items():
            # a broker's code alone (NOT_MASTER) does not say who is master: its words do
            example = result["error_examples"].get(reason) if reason.isupper() else None
            print(f"  errors {reason}: {n:,}" + (f" (first: {example})" if example else ""))
        flow = result["flow_control"]
        if producer.tracer is not None:
            print(f"trace: {producer.tracer.dispatcher.summary()}")
        if flow["flow_control"]:
            print(f"throttled {flow['flow_control']:,.0f} attempt(s) (FLOW_CONTROL), backed off "
                  f"{flow['backoff_s']:.1f} s in all, gave up on {flow['flow_control_gave_up']:,.0f}")
    if result["acked"] == 0:
        first = next(iter(result["error_examples"].values()), "")
        raise CommandFailed("no message was acknowledged" + (f": {first}" if first else ""))
    return 0
