"""Small helpers shared by command modules."""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from contextlib import contextmanager
from typing import Any

from broker_core.flags import (  # noqa: F401 - the commands' numeric types, from here
    AT_LEAST_1,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    SHARE,
    Bounded,
    Range,
    add_realtime_arg,
    float_range,
    fraction,
    int_range,
    nonneg_float,
    nonneg_int,
    port,
    positive_float,
    positive_int,
    seed,
    share,
    take_realtime,
)
from broker_core.protocol.system_topics import check_group
from console.errors import CommandFailed, UsageError


def add_subparser(sub, name: str, help_text: str, **kwargs):
    """Add a subcommand whose bare form (`floodgate NAME`) prints its help."""
    parser = sub.add_parser(name, help=help_text, description=help_text, **kwargs)
    parser.set_defaults(_parser=parser, func=None)
    return parser


# Acked sends answered short of SEND_OK (protocol.STORED_CODES): stored, not as promised
STORED_SHORT = {
    "SLAVE_NOT_AVAILABLE": "stored on its master alone: no slave in sync, a failover now "
                           "would lose them",
    "FLUSH_SLAVE_TIMEOUT": "stored on its master; the slave did not confirm in time",
    "FLUSH_DISK_TIMEOUT": "stored, not flushed to disk in time",
}
ONE_COPY = ("SLAVE_NOT_AVAILABLE", "FLUSH_SLAVE_TIMEOUT")  # of those, on the master alone

def number(parser, flag: str, valid: Range, *, group=None, type=float, **kwargs):
    """add_argument for a number with its valid range, checked by `checked` commands
    (the capacity commands'; new flags take a `Bounded` type instead)."""
    action = (group or parser).add_argument(flag, type=type, **kwargs)
    ranges = dict(parser.get_default("_ranges") or {})
    ranges[action.dest] = (flag, valid)
    parser.set_defaults(_ranges=ranges)
    return action


def check_numbers(args) -> None:
    """UsageError naming the first flag whose value is out of its range."""
    for dest, (flag, valid) in (getattr(args, "_ranges", None) or {}).items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        if not math.isfinite(value):
            raise UsageError(f"{flag} must be a finite number, got {value:g}")
        if not valid.contains(value):
            raise UsageError(f"{flag} must be {valid}, got {value:g}")


def consumer_group(name: str) -> str:
    """argparse type of a consumer group's --group: the brokers' rule for its name, told
    before any broker is asked (they would each refuse it, or know of no such group)."""
    try:
        return check_group(name)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def checked(func):
    """A command's run(args) that first checks its numeric flags (see `number`)."""

    @functools.wraps(func)
    def run(args):
        check_numbers(args)
        return func(args)

    return run


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


@contextmanager
def spark_failures():
    """Spark's and Java's own exceptions as one line (pointing to the JVM's log), exit 1.

    Their text runs to a Java stack trace; our own errors (ReportError, ...)
    are already one line and pass through untouched.
    """
    try:
        yield
    except Exception as exc:
        if type(exc).__module__.split(".")[0] not in ("pyspark", "py4j", "grpc"):
            raise
        from spark_reports.session import failure_message

        raise CommandFailed(failure_message(exc)) from exc


def add_cluster_args(parser) -> None:
    """--cluster FILE, --admin-token and --json: what every command on a cluster's brokers
    takes."""
    from pathlib import Path

    parser.add_argument("--cluster", type=Path, required=True, metavar="FILE",
                        help="cluster.toml (from `floodgate cluster up`)")
    parser.add_argument("--admin-token", help="the brokers' --admin-token, if they set one")
    parser.add_argument("--json", action="store_true")


def broker_http(broker: str, cluster) -> str:
    """The HTTP address `--broker` means: as given, or the named broker's in `--cluster`."""
    if cluster is None:
        if ":" not in broker:
            raise UsageError(f"--broker {broker!r} is not an HTTP address (HOST:PORT); "
                             "to name a broker, give its --cluster FILE too")
        return broker
    from broker_core.cluster.cluster_file import load_cluster

    spec = load_cluster(cluster)
    for b in spec.brokers:
        if broker in (b.name, b.http):
            return b.http
    members = [b.name for b in spec.brokers if b.group == broker]
    if members:  # which of them is the master now is ZooKeeper's to say, not the file's
        raise UsageError(f"{broker} is a group: name one of its brokers "
                         f"({', '.join(members)})")
    raise UsageError(f"no broker {broker!r} in {cluster}: it has "
                     f"{', '.join(b.name for b in spec.brokers)}")


def each_broker(cluster_path, call, only=None) -> tuple[dict[str, Any], list[str]]:
    """`call(http address)` on every broker of a cluster file (or those named in `only`,
    broker or group names): (broker name -> answer, one line per broker that failed).
    A broker that cannot be reached is named; the others still get theirs."""
    from broker_core.client.admin import AdminError
    from broker_core.cluster.cluster_file import load_cluster

    answers, failed = {}, []
    for b in load_cluster(cluster_path).brokers:
        if only is not None and b.name not in only and b.group not in only:
            continue
        try:
            answers[b.name] = call(b.http)
        except AdminError as exc:  # its words start with the address: put the name first
            why = str(exc)
            failed.append(f"{b.name} at {why}" if why.startswith(b.http) else f"{b.name}: {why}")
    return answers, failed


def broker_groups(cluster_path) -> dict[str, str]:
    """broker name -> its group in the cluster file (a broker without one: its own)."""
    from broker_core.cluster.cluster_file import load_cluster

    return {b.name: b.group or b.name for b in load_cluster(cluster_path).brokers}


def copied_answers(cluster_path, answers: dict[str, dict]) -> set[str]:
    """Of the brokers' admin answers, the slaves' that copy an answering broker of their
    group (`console.data.replicas.slave_copies`): shown, they would count twice."""
    from console.data.replicas import slave_copies

    group_of = broker_groups(cluster_path)
    return slave_copies((n, group_of.get(n, n), doc.get("role") == "SLAVE")
                        for n, doc in answers.items())


def finish(answers: dict, failed: list[str]) -> int:
    """Exit 0, or fail naming the brokers that were not reached (after the others)."""
    if failed:
        done = f"; done on {', '.join(answers)}" if answers else ""
        raise CommandFailed(f"{len(failed)} broker(s) failed: {'; '.join(failed)}{done}")
    return 0
