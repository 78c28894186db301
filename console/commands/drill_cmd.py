"""`floodgate drill failover`: kill a group's master under load, count what was lost."""

from __future__ import annotations

from pathlib import Path

from console.commands.common import (
    ONE_COPY,
    add_subparser,
    int_range,
    positive_float,
    print_json,
)
from console.errors import CommandFailed, UsageError


def register(sub) -> None:
    parser = add_subparser(sub, "drill", "failure drills against a local replicated cluster")
    dsub = parser.add_subparsers(metavar="DRILL")
    p = add_subparser(dsub, "failover", "produce with sync replication, SIGKILL a group's "
                      "master mid-run, read everything back (exit 1 if an acked message is lost)")
    p.add_argument("--cluster", type=Path, required=True, metavar="FILE",
                   help="cluster.toml of `floodgate cluster up --groups G --replicas R`")
    p.add_argument("--group", metavar="NAME", help="group whose master dies (the first)")
    p.add_argument("--rate", type=positive_float, default=2000.0,
                   help="messages per second (2000)")
    p.add_argument("--duration", type=positive_float, default=30.0,
                   help="seconds of producing (30)")
    p.add_argument("--kill-after", type=positive_float, default=10.0,
                   help="seconds before the kill (10)")
    p.add_argument("--size", type=int_range(24, 4 << 20), default=128,  # 24: run id and seq
                   help="message body bytes, 24 to 4 MiB (128)")
    p.add_argument("--topic", default="drill", help="topic produced to and read back (drill)")
    p.add_argument("--json", action="store_true", help="the result as JSON")
    p.set_defaults(func=run_failover)
    from console.commands import chaos_cmd

    chaos_cmd.register(dsub)


def report_lines(result, restarts: bool = False) -> list[str]:
    """The drill's result for a person: counts with separators, acks stored on one copy
    called out, and what becomes of the master it killed (`restarts`: the cluster's
    supervisor restarts brokers that die, `cluster up --restart`)."""
    fo = f"{result.failover_s:.3f} s" if result.failover_s is not None else "never"
    raft = result.consensus == "raft"
    master, epoch, slave = ("leader", "term", "follower") if raft else ("master", "epoch", "slave")
    lines = [f"group {result.group}: {master} {result.old_master} killed, "
             f"{result.new_master or 'nobody'} {master} now ({epoch} {result.epoch_before} -> "
             f"{result.epoch_after})",
             f"failover   {fo} (kill to first ack by the new {master})"]
    by = ", ".join(f"{n:,} {status}" for status, n in
                   sorted(result.acked_by_status.items(), key=lambda kv: -kv[1]))
    lines.append(f"sent       {result.sent:,} at {result.rate:.0f} msgs/s; acked "
                 f"{result.acked:,}" + (f" ({by})" if by else ""))
    one_copy = sum(n for status, n in result.acked_by_status.items() if status in ONE_COPY)
    if one_copy:
        lines.append(f"warning    {one_copy:,} acks ({one_copy / max(1, result.acked):.0%}) "
                     "were stored on one copy only (no slave in sync, or not in time): a "
                     "second failure then would lose them")
    lines.append(f"lost       {result.lost}   duplicates {result.duplicates}   "
                 f"send errors {result.send_errors}")
    back = f"{slave} t{result.epoch_after}" if raft else f"slave e{result.epoch_after}"
    if restarts:
        lines.append(f"next       the supervisor restarts {result.old_master}: it rejoins "
                     f"{result.group} as a {slave} (`floodgate status`: {back} once back)")
    else:
        lines.append(f"next       {result.old_master} stays down: `floodgate cluster up "
                     "--restart` restarts brokers that die; restarted, it rejoins its group "
                     f"as a {slave} (`floodgate status` counts it down until then)")
    return lines


def run_failover(args) -> int:
    from broker_core.cluster.cluster_file import load_cluster
    from broker_core.cluster.drill import DrillSpec, run_drill

    if args.kill_after >= args.duration:
        raise UsageError(f"--kill-after ({args.kill_after:g}) must be less than --duration "
                         f"({args.duration:g})")
    spec = load_cluster(args.cluster)
    result = run_drill(spec, DrillSpec(args.group, args.rate, args.duration, args.kill_after,
                                       args.size, args.topic))
    # what the post-mortem's impact section quotes (console.command_events)
    args.event_fields = {"lost": result.lost, "duplicated": result.duplicates,
                         "failover_s": result.failover_s}
    if args.json:
        print_json(result.to_dict())
    else:
        print("\n".join(report_lines(result, spec.restart)))
    if not result.ok:
        raise CommandFailed(f"{result.lost} acknowledged message(s) lost "
                            f"(first seqs: {result.lost_sample[:5]})")
    return 0
