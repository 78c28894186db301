"""`floodgate demo`: a local cluster under load with injected faults, in the console.

`--headless N` runs N seconds without the TUI and prints a summary (`--json`:
acked, errors, brokers [{name, state, p99_s, max_s}], fuse_transitions
[{time, broker, event, reason}], faults [{time, broker, action}]).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

from console.commands.common import add_subparser, print_json
from console.errors import CommandFailed, UsageError


def register(sub) -> None:
    parser = add_subparser(sub, "demo", "a local cluster under load with injected faults, "
                                        "watched in the console")
    parser.add_argument("--brokers", type=int, default=6, help="brokers to start (6: fuse cap 1)")
    parser.add_argument("--rate", type=float, default=5000, help="messages per second (5000)")
    parser.add_argument("--no-faults", action="store_true", help="no fault script")
    parser.add_argument("--headless", type=float, metavar="SECONDS",
                        help="run this long without the TUI, then print a summary")
    parser.add_argument("--json", action="store_true", help="with --headless: JSON summary")
    parser.add_argument("--data", type=Path, metavar="DIR",
                        help="keep the cluster's data here (default: a temporary dir, removed)")
    parser.add_argument("--base-port", type=int, default=20900, metavar="P",
                        help="broker i gets TCP P+2i and HTTP P+2i+1; the producer's /stats "
                             "the next port (20900)")
    parser.set_defaults(func=run)


def _check(args) -> None:
    if args.brokers < 1:
        raise UsageError("--brokers must be at least 1")
    if args.rate <= 0:
        raise UsageError("--rate must be positive")
    if args.headless is not None and args.headless <= 0:
        raise UsageError("--headless must be a positive number of seconds")
    if args.json and args.headless is None:
        raise UsageError("--json needs --headless SECONDS (the TUI is not JSON)")
    if not 1024 <= args.base_port <= 65535 - 2 * args.brokers - 1:
        raise UsageError("--base-port must leave room for every broker below 65536")


def run(args) -> int:
    import logging

    from console.demo import Demo, DemoOptions

    _check(args)
    opts = DemoOptions(args.brokers, args.rate, not args.no_faults, args.data, args.base_port)
    demo = Demo(opts)
    stop = threading.Event()
    if args.headless is None:
        # Textual owns the terminal: logs go to a file, not over the screen.
        logging.basicConfig(level=logging.INFO, filename=str(_log_path(args)), force=True)
    print(f"starting {args.brokers} brokers on ports {args.base_port}.. and a producer at "
          f"{args.rate:g} msgs/s …", file=sys.stderr)
    demo.start()
    try:
        if args.headless is not None:
            for sig in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, lambda *_: stop.set())
            return _headless(demo, args, stop)
        from console.app import FloodgateApp

        cluster_file = demo.data_dir / "cluster.toml"
        app = FloodgateApp(demo.console_config(), hint=(
            f"faults start at 6 s (broker-2 stalls, then broker-4 errors). In another "
            f"terminal: floodgate status --cluster {cluster_file} --producers {demo.http.addr}"))
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda *_: app.exit())
        app.run()
        return 0
    finally:
        demo.stop()


def _log_path(args) -> Path:
    if args.data:
        args.data.mkdir(parents=True, exist_ok=True)
        return args.data / "demo.log"
    import tempfile

    return Path(tempfile.gettempdir()) / "floodgate-demo.log"


def _headless(demo, args, stop: threading.Event) -> int:
    from console.poller import Poller
    from console.sources import HttpBrokers, HttpProducers

    cfg = demo.console_config()
    poller = Poller(cfg, HttpBrokers(cfg.brokers, cfg.timeout),
                    HttpProducers(cfg.producers, cfg.timeout)).start()
    end = time.monotonic() + args.headless
    try:
        while not stop.wait(min(1.0, max(0.0, end - time.monotonic()))):
            demo.collect_transitions()
            if time.monotonic() >= end:
                break
    except KeyboardInterrupt:
        pass
    finally:
        poller.stop()
    state = poller.state
    summary = {**demo.load_totals(),
               "brokers": [{"name": b.name, "state": b.state, "p99_s": b.p99, "max_s": b.max}
                           for b in (state.brokers if state else ())],
               "fuse_transitions": demo.collect_transitions(),
               "faults": [{"time": a.time, "broker": a.broker, "action": a.action}
                          for a in demo.actions]}
    if args.json:
        print_json(summary)
    else:
        _print_summary(summary)
    if not summary["acked"]:
        raise CommandFailed("no message was acknowledged")
    return 0


def _print_summary(summary: dict) -> None:
    from console.format import clock, ms

    print(f"acked {summary['acked']:,}  errors {summary['errors']:,}")
    for b in summary["brokers"]:
        print(f"  {b['name']:10} {b['state']:9} p99 {ms(b['p99_s']):>10}  max {ms(b['max_s']):>10}")
    for f in summary["faults"]:
        print(f"  {clock(f['time'])} fault {f['broker']}: {f['action']}")
    isolations = [t for t in summary["fuse_transitions"] if t["event"] == "isolate"]
    print(f"fuse: {len(summary['fuse_transitions'])} transitions, {len(isolations)} isolations")
