"""A controller's command line: `python -m broker_core controller` and `floodgate
controller` both take these arguments and run `run_controller`, so that a controller
starts without the console and its flags are written once.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

from broker_core.flags import ArgsError, float_range
from broker_core.ha.records import SESSION_S

SESSION_RANGE = float_range(0.2, 60)  # seconds, as a broker's --zk-session-timeout


def add_controller_arguments(p) -> None:
    p.add_argument("--zk", required=True, metavar="HOST:PORT[,...]", help="ZooKeeper")
    p.add_argument("--cluster", default="floodgate", metavar="NAME",
                   help="cluster name: its records live under /floodgate/NAME (floodgate)")
    p.add_argument("--session-timeout", type=SESSION_RANGE, default=SESSION_S,
                   metavar="SECONDS",
                   help=f"this controller's ZooKeeper session, 0.2-60 ({SESSION_S:g}): a dead "
                   "leader is replaced this long after it died")
    p.add_argument("--broker-session-timeout", type=SESSION_RANGE, default=SESSION_S,
                   metavar="SECONDS",
                   help=f"the brokers' session timeout, 0.2-60 ({SESSION_S:g}): after its own "
                   "link to ZooKeeper was down, the controller waits 1.5 x this before judging "
                   "brokers")
    p.add_argument("--name", help="this controller's name in the election (host-pid)")
    p.add_argument("--events", type=Path, metavar="FILE",
                   help="append each failover to this events log too (cluster up: "
                   "events.jsonl in the cluster's data dir)")


def run_controller(args) -> int:
    from broker_core.cluster.roles import log_ends
    from broker_core.errors import BrokerError
    from broker_core.ha.controller import Controller
    from broker_core.ha.records import parse_zk
    from broker_core.log_format import configure_logging

    try:
        hosts = parse_zk(args.zk)
    except BrokerError as exc:
        raise ArgsError(f"--zk: {exc}") from None
    configure_logging()
    events = None
    if args.events is not None:
        from broker_core.observe.events import EventLog

        events = EventLog(args.events.resolve(), "controller")
    controller = Controller(hosts, args.cluster, session_s=args.session_timeout,
                            broker_session_s=args.broker_session_timeout, name=args.name,
                            log_ends=log_ends, events=events)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: threading.Thread(target=controller.stop).start())
    controller.run()
    return 0
