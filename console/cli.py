"""The `floodgate` command: one entry point, a subcommand per job.

Each job lives in `console/commands/<job>.py` with `register(subparsers)`
that adds its parser and sets `func=run(args) -> int`. Command modules import
their heavy dependencies (Spark, Textual) inside `run`, so `--help` is fast.
Exit codes: 0 ok, 1 failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from broker_core.flags import FlagParser
from console import __version__
from console.commands import (
    acl_cmd,
    bench_cmd,
    broker_cmd,
    capacity_cmd,
    certs_cmd,
    cluster_cmd,
    console_cmd,
    controller_cmd,
    demo_cmd,
    dlq_cmd,
    drill_cmd,
    fault_cmd,
    fuse_cmd,
    gen_cmd,
    grafana_cmd,
    heatmap_cmd,
    incident_cmd,
    offsets_cmd,
    prometheus_cmd,
    quota_cmd,
    report_cmd,
    spark_cmd,
    status_cmd,
    topic_cmd,
    trace_cmd,
    tune_cmd,
    tx_cmd,
)
from console.errors import EXIT_FAILED, EXIT_USAGE, UsageError, known_error_types

# One row per subcommand module; order is the order shown in --help. Each module's
# `register(subparsers)` adds its parser; what it runs is imported when it runs.
COMMANDS = (
    # watching a cluster: what an SRE reaches for first
    demo_cmd, console_cmd, status_cmd, trace_cmd, incident_cmd,
    # running and drilling brokers
    broker_cmd, cluster_cmd, controller_cmd, fault_cmd, topic_cmd, offsets_cmd, dlq_cmd,
    tx_cmd, acl_cmd, certs_cmd, quota_cmd, drill_cmd, bench_cmd, fuse_cmd,
    # hosts
    tune_cmd,
    # reports and planning
    gen_cmd, report_cmd, spark_cmd, capacity_cmd, heatmap_cmd,
    # Prometheus and Grafana
    prometheus_cmd, grafana_cmd,
)


class Parser(FlagParser):
    """The `floodgate` parser: broker_core.flags.FlagParser's one-line refusals."""


def build_parser() -> Parser:
    parser = Parser(
        prog="floodgate",
        description="Operations console and SRE toolkit for a RocketMQ-style message cluster.",
    )
    parser.add_argument("--version", action="version", version=f"floodgate {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks instead of one-line errors"
    )
    parser.add_argument(
        "--tls-ca", metavar="FILE",
        help="brokers serve TLS signed by this CA; default: $FLOODGATE_TLS_CA, or the CA the "
        "--cluster file names (`cluster up --tls`)")
    parser.add_argument(
        "--credentials", metavar="FILE",
        help="user and secret (TOML, mode 0600) for brokers that enforce an ACL; default: "
        "$FLOODGATE_CREDENTIALS")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for command in COMMANDS:
        command.register(sub)
    _take_anywhere(parser, [a for a in parser._actions if a.dest in ANYWHERE])
    return parser


ANYWHERE = ("debug", "tls_ca", "credentials")  # the global flags a subcommand takes too


def _take_anywhere(parser: argparse.ArgumentParser, flags: list[argparse.Action]) -> None:
    """Every subcommand takes the global flags too, after its own (`floodgate bench produce
    ... --tls-ca FILE`): an error says "give --tls-ca" and the operator adds it at the end.
    Hidden from the subcommands' help (the top level's lists them) and SUPPRESS as their
    default, so a flag given before the subcommand is not reset. A subcommand that has a
    flag of the same name keeps its own (`broker serve --tls-ca`). argparse has no public
    way to walk its subparsers: `_actions` and `_option_string_actions` are its own names,
    the same since Python 3.2."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for child in {id(p): p for p in action.choices.values()}.values():  # aliases: once
            for flag in flags:
                if any(s in child._option_string_actions for s in flag.option_strings):
                    continue
                extra = {"action": "store_true"} if flag.nargs == 0 else {"metavar": "FILE"}
                child.add_argument(*flag.option_strings, dest=flag.dest,
                                   default=argparse.SUPPRESS, help=argparse.SUPPRESS, **extra)
            _take_anywhere(child, flags)


def _use_credentials(args) -> None:
    """`--credentials FILE`, else $FLOODGATE_CREDENTIALS, else the credentials file a
    `--cluster` file names (`cluster up --acl`): every connection authenticates with them.
    The same for TLS: `--tls-ca`, $FLOODGATE_TLS_CA, the cluster file's `tls_ca`; and the
    admin endpoints' token: `--admin-token`, $FLOODGATE_ADMIN_TOKEN_FILE, `admin_token`."""
    from broker_core.acl import admin_token, credentials, tls

    named = named_tls = named_token = None
    if getattr(args, "cluster", None):
        from broker_core.cluster.cluster_file import load_cluster
        from broker_core.errors import BrokerError

        try:
            spec = load_cluster(args.cluster)
            named, named_tls = spec.credentials or None, spec.tls_ca or None
            named_token = spec.admin_token or None
        except BrokerError:
            pass  # the command says what is wrong with its cluster file
    if args.credentials:
        credentials.use(args.credentials)
    elif not os.environ.get(credentials.ENV):
        credentials.use(named)
    if args.tls_ca:
        tls.use(args.tls_ca)
    elif not os.environ.get(tls.ENV_CA):
        tls.use(named_tls)
    if not os.environ.get(admin_token.ENV):
        admin_token.use(named_token)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        # `floodgate` or `floodgate tune` alone: show the help of that level.
        (getattr(args, "_parser", None) or parser).print_help()
        return EXIT_USAGE
    debug = args.debug or os.environ.get("FLOODGATE_DEBUG") == "1"
    try:
        _use_credentials(args)
    except ValueError as exc:
        print(f"floodgate {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    code = EXIT_FAILED
    try:
        code = _run(args, debug)
        return code
    finally:
        from console import command_events

        command_events.record(args, sys.argv[1:] if argv is None else argv, code)


def _run(args, debug: bool) -> int:
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"floodgate {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_FAILED
    except Exception as exc:  # noqa: BLE001 - turned into one line below
        if debug:
            traceback.print_exc()
        if isinstance(exc, known_error_types()):
            print(f"floodgate {args.command}: error: {exc}", file=sys.stderr)
        else:
            print(
                f"floodgate {args.command}: internal error: {type(exc).__name__}: {exc}"
                " (run with --debug for the traceback)",
                file=sys.stderr,
            )
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
