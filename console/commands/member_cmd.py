"""`floodgate cluster add-replica|remove-replica`: a raft group of a local cluster gains or
loses one member, on an operator's word. Adding: the supervisor starts a new broker
(`--raft-join`: it does not vote yet), the leader catches it up from a snapshot of its
store and then commits a configuration naming it. One change at a time; to replace a
member, add the new one first, then remove the old.

    floodgate cluster add-replica --cluster FILE --group group-1
    floodgate cluster remove-replica --cluster FILE --group group-1 --member group-1-a
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

from console.commands.common import CommandFailed, UsageError, add_cluster_args

START_S = 30.0  # for the new broker to answer /healthz (as `cluster up` waits)
STOP_S = 15.0  # for a removed broker to stop: the supervisor's grace (10 s) and a margin


def register(csub, add_subparser) -> None:
    p = add_subparser(csub, "add-replica", "add a member to a raft group of a local cluster: "
                      "a new broker, caught up from a snapshot of the leader's store, then "
                      "voting")
    add_cluster_args(p)
    p.add_argument("--group", required=True, help="the raft group")
    p.set_defaults(func=run_add)
    p = add_subparser(csub, "remove-replica", "take a member out of a raft group of a local "
                      "cluster (it stops voting, then its broker is stopped); 3 members stay")
    add_cluster_args(p)
    p.add_argument("--group", required=True, help="the raft group")
    p.add_argument("--member", required=True, metavar="BROKER", help="the member to remove")
    p.set_defaults(func=run_remove)


def raft_group(spec, path, group: str) -> list:
    """The members of `group` in the cluster file; UsageError unless its groups run Raft."""
    if not spec.raft:
        raise UsageError(f"{path}: its groups do not run Raft (cluster up --consensus raft); "
                         "a controller's groups have a fixed set of brokers")
    members = spec.groups.get(group)
    if not members or not members[0].group:
        raise UsageError(f"no group {group!r} in {path} "
                         f"(groups: {', '.join(sorted(spec.groups))})")
    return members


def check_removal(members: list, name: str, group: str) -> None:
    """UsageError for a member the group does not have, or a group left below three."""
    if name not in {b.name for b in members}:
        raise UsageError(f"{name} is not a member of {group} "
                         f"({', '.join(b.name for b in members)})")
    if len(members) <= 3:
        raise UsageError(f"{group} has {len(members)} members: removing one leaves "
                         f"{len(members) - 1}, and a group of 2 cannot lose one (add a "
                         "replica first)")


def supervisor(spec, path) -> int | None:
    """The pid of the `cluster up` that runs the file's brokers (None: it runs no more).
    CommandFailed when that process would not take SIGHUP: SIGHUP's default would end it
    and leave its brokers unsupervised (a `cluster up` from before add-replica, one not yet
    supervising, or the pid another process's now)."""
    pid = spec.supervisor_pid
    if not pid:
        return None
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone (or its pid someone else's now)
        return None
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return pid  # no /proc to ask: trust the file
    caught = next((int(line.split()[1], 16) for line in status.splitlines()
                   if line.startswith("SigCgt:")), 1 << (signal.SIGHUP - 1))
    if not caught >> (signal.SIGHUP - 1) & 1:
        raise CommandFailed(f"{path}: its supervisor (pid {pid}) does not take SIGHUP (still "
                            "starting, or a floodgate from before add-replica): try again, or "
                            "restart the cluster")
    return pid


def leader_of(members: list, group: str):
    """The member that says it leads `group` (CommandFailed when none does)."""
    from broker_core.cluster.roles import broker_role

    roles = {b.name: broker_role(b.addr) for b in members}
    leader = next((b for b in members if roles[b.name].get("role") == "MASTER"), None)
    if leader is None:
        raise CommandFailed(f"{group} has no leader now (members: " + ", ".join(
            f"{n} {r.get('role', 'not answering').lower()}" for n, r in roles.items()) + ")")
    return leader


def run_add(args) -> int:
    from broker_core.client import admin
    from broker_core.cluster.cluster_file import load_cluster
    from broker_core.cluster.health import last_line, wait_healthy
    from broker_core.cluster.members import next_member, raft_member_flag
    from broker_core.errors import BrokerError

    spec = load_cluster(args.cluster)
    members = raft_group(spec, args.cluster, args.group)
    if spec.netns:
        raise UsageError(f"{args.cluster}: a cluster on namespaced hosts (--netns) has no "
                         "host for a new broker")
    pid = supervisor(spec, args.cluster)
    if pid is None:
        raise CommandFailed(f"{args.cluster}: no `cluster up` supervising it (down?): "
                            "nobody would start the new broker")
    leader_of(members, args.group)  # no leader: nothing started in vain
    try:
        entry = next_member(spec, args.group)
    except BrokerError as exc:
        raise CommandFailed(str(exc)) from None
    spec.brokers.append(entry)
    spec.save(args.cluster)
    _hup(pid)
    log = Path(args.cluster).parent / "logs" / f"{entry.name}.log"  # where `up` puts them
    try:
        try:
            wait_healthy(entry.http, START_S, tls_ca=spec.tls_ca or None)
        except BrokerError as exc:  # no log at all: the supervisor read another file
            why = last_line(log) or f" (is {args.cluster} the file its supervisor wrote?)"
            raise BrokerError(f"{exc}{why}") from None
        # asked now, not before: leadership may have moved while the broker started
        leader = leader_of(members, args.group)
        answer = admin.members(leader.http, {"add": raft_member_flag(entry)},
                               args.admin_token)
    except (BrokerError, CommandFailed) as exc:
        _forget(args.cluster, entry.name, pid)
        raise CommandFailed(f"{args.group}: {entry.name} not added: {exc} (taken out of the "
                            "cluster file again, its broker stopped)") from None
    names = _short(answer.get("members", []), args.group)
    return _say(args, answer, f"{args.group}: {entry.name} joined (members {names}; "
                f"{_mb(answer.get('snapshot_bytes', 0))} of store copied in "
                f"{float(answer.get('took_s', 0)):.1f} s; term {answer.get('term')})")


def run_remove(args) -> int:
    from broker_core.client import admin
    from broker_core.cluster.cluster_file import load_cluster
    from broker_core.errors import BrokerError

    spec = load_cluster(args.cluster)
    members = raft_group(spec, args.cluster, args.group)
    check_removal(members, args.member, args.group)
    pid = supervisor(spec, args.cluster)  # before the change: one that cannot take it refused
    # the leader itself may be the one removed: it hands over once the change commits
    leader = leader_of(members, args.group)
    try:
        answer = admin.members(leader.http, {"remove": args.member}, args.admin_token)
    except BrokerError as exc:
        raise CommandFailed(f"{args.group}: {args.member} not removed: {exc}") from None
    _forget(args.cluster, args.member, pid)
    gone = spec.broker(args.member)
    stopped = ("no supervisor running: stop its broker yourself" if pid is None
               else "its broker stopped" if _stopped(gone.addr, STOP_S)
               else f"its broker still answers after {STOP_S:g} s")
    names = _short(answer.get("members", []), args.group)
    return _say(args, answer, f"{args.group}: {args.member} removed (members {names}; term "
                f"{answer.get('term')}); {stopped}")


def _forget(path, name: str, pid: int | None) -> None:
    """Take `name` out of the cluster file (read again: it is the file that counts) and
    have the supervisor stop its broker."""
    from broker_core.cluster.cluster_file import load_cluster

    spec = load_cluster(path)
    spec.brokers = [b for b in spec.brokers if b.name != name]
    spec.save(path)
    if pid is not None:
        _hup(pid)


def _hup(pid: int) -> None:
    """Have the supervisor read the cluster file again (gone meanwhile: the wait for the
    broker it would have started or stopped says so)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGHUP)


def _stopped(addr: str, timeout: float) -> bool:
    """Whether the broker at `addr` stops listening within `timeout` (the supervisor gives
    it 10 s to stop before it kills it)."""
    import socket
    import time

    host, port = addr.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=0.5).close()
        except ConnectionRefusedError:
            return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def _short(flags: list[str], group: str) -> str:
    """group-1-a=h:p:r, ... -> "a, b, c" (a name not of the group's pattern: whole)."""
    names = [f.split("=", 1)[0] for f in flags]
    return ", ".join(n.removeprefix(f"{group}-") for n in names) or "?"


def _mb(n) -> str:
    return f"{int(n or 0) / 1e6:.1f} MB"


def _say(args, doc: dict, line: str) -> int:
    print(json.dumps(doc) if args.json else line)
    return 0
