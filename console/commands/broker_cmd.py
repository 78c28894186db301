"""`floodgate broker serve`: run one broker in the foreground. Its flags and what it runs
are the broker's own (broker_core.server.serve_command, also `python -m broker_core
broker`); this adds it to the `floodgate` command."""

from __future__ import annotations

from broker_core.server.serve_command import ArgsError, add_serve_arguments, run_serve
from console.commands.common import add_subparser
from console.errors import UsageError


def register(sub) -> None:
    parser = add_subparser(sub, "broker", "run a broker")
    bsub = parser.add_subparsers(metavar="ACTION")
    serve = add_subparser(bsub, "serve", "serve one broker: TCP protocol, /metrics, /stats")
    add_serve_arguments(serve)
    serve.set_defaults(func=run)


def run(args) -> int:
    try:
        return run_serve(args)
    except ArgsError as exc:
        raise UsageError(str(exc)) from None
