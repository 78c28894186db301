"""`python -m broker_core` (or `floodgate-broker`): a broker or a controller, started
without the console, as `floodgate cluster up` starts them:

    python -m broker_core broker --name b1 --data /var/lib/fg/b1 [--port 10911 ...]
    python -m broker_core controller --zk HOST:PORT [--cluster NAME ...]

The flags are the same as `floodgate broker serve` and `floodgate controller` (one
definition: server.serve_command, cluster.controller_command). Exit codes: 0 ok, 1 it
could not run (one line on stderr), 2 bad usage.
"""

from __future__ import annotations

import sys

from broker_core.cluster.controller_command import add_controller_arguments, run_controller
from broker_core.errors import BrokerError
from broker_core.flags import FlagParser
from broker_core.server.serve_command import ArgsError, add_serve_arguments, run_serve


def build_parser() -> FlagParser:
    parser = FlagParser(prog="floodgate-broker",
                        description="a floodgate broker or controller, in the foreground")
    sub = parser.add_subparsers(dest="role", metavar="ROLE", required=True,
                                parser_class=FlagParser)
    broker = sub.add_parser("broker", help="serve one broker: TCP protocol, /metrics, /stats")
    add_serve_arguments(broker)
    broker.set_defaults(func=run_serve)
    controller = sub.add_parser("controller", help="promote an in-sync slave when a "
                                "master's ZooKeeper session ends")
    add_controller_arguments(controller)
    controller.set_defaults(func=run_controller)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ArgsError as exc:
        print(f"floodgate-broker {args.role}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except (BrokerError, OSError) as exc:
        print(f"floodgate-broker {args.role}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
