"""`floodgate tune show|plan|apply|verify|rollback|persist|numa-exec`: host tuning."""

from __future__ import annotations

import argparse
from pathlib import Path

from console.commands.common import add_subparser, print_json
from console.errors import UsageError

EXAMPLE = "e.g. floodgate tune plan --profile broker --data-dir /data/store"


def register(sub) -> None:
    parser = add_subparser(sub, "tune", "host tuning profiles: plan, apply, verify, roll back, persist")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")

    p = add_subparser(actions, "show", "each setting of a profile: current, target, status")
    _common(p, run_show)
    p = add_subparser(actions, "plan", "the changes apply would make (nothing written)")
    _common(p, run_plan)
    p = add_subparser(actions, "apply", "journal the originals, then apply; restore all on failure")
    _common(p, run_apply)
    p.add_argument("--dry-run", action="store_true", help="show the plan, write nothing")
    _state_dir(p)
    p = add_subparser(actions, "verify", "exit 0 when the host matches the profile, 1 on drift")
    _common(p, run_verify)
    p = add_subparser(actions, "rollback", "restore the originals saved by an apply")
    p.add_argument("--journal", metavar="ID", help="journal to restore (default: the latest apply)")
    p.add_argument("--list", action="store_true", help="list the journals instead")
    p.add_argument("--root", default="/", metavar="DIR", help="stands for / (default /)")
    p.add_argument("--json", action="store_true", help="print JSON")
    _state_dir(p)
    p.set_defaults(func=run_rollback)
    p = add_subparser(actions, "persist", "write sysctl.d, udev, systemd drop-in and limits.d files")
    _common(p, run_persist)
    p.add_argument("--dry-run", action="store_true", help="print the files, write nothing")
    p = add_subparser(actions, "numa-exec", "run a command with memory interleaved over NUMA nodes")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command")
    p.set_defaults(func=run_numa_exec)


def _common(p: argparse.ArgumentParser, func) -> None:
    p.add_argument("--profile", default="broker", metavar="NAME", help="profile (default broker)")
    p.add_argument(
        "--profile-dir", action="append", default=[], metavar="DIR",
        help="user profiles, searched before the built-ins (repeatable)",
    )  # fmt: skip
    p.add_argument("--root", default="/", metavar="DIR", help="stands for / (default /)")
    p.add_argument("--device", metavar="NAME", help="data disk for the scheduler (e.g. nvme0n1)")
    p.add_argument("--data-dir", metavar="PATH", help="find the data disk from this directory")
    p.add_argument("--force", action="store_true", help="allow targets past the safety bounds")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=func)


def _state_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--state-dir", metavar="DIR",
        help="where journals live (default DIR/var/lib/floodgate/tuning)",
    )  # fmt: skip


def _plan(args):
    from kernel_tuning import available_profiles, build_plan

    for folder in args.profile_dir:  # silently ignored, a typo would plan the built-ins
        if not Path(folder).is_dir():
            raise UsageError(f"--profile-dir {folder}: no such directory")
    if args.profile not in available_profiles(args.profile_dir):
        names = ", ".join(available_profiles(args.profile_dir))
        raise UsageError(f"unknown profile {args.profile!r} (valid: {names})")
    return build_plan(
        args.profile, args.root, args.profile_dir,
        device=args.device, data_dir=args.data_dir, force=args.force,
    )  # fmt: skip


def _table(checks) -> None:
    from kernel_tuning.plugins.base import shown_target

    rows = [("SETTING", "CURRENT", "TARGET", "STATUS")]
    for c in checks:
        target = shown_target(c.setting.target, c.setting.mode)
        rows.append((c.setting.name, _short(c.current), _short(target), c.status))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}")


def _short(value) -> str:
    text = "-" if value is None else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _notes(plan) -> None:
    for c in plan.checks:
        note = "; ".join(x for x in (c.setting.note, c.detail) if x)
        if note and c.status != "ok":
            print(f"  {c.setting.name}: {note}")
    for note in plan.notes:
        print(f"note: {note}")


def _header(plan) -> str:
    gib = plan.mem_kb / 1024**2
    return f"profile {plan.profile.name} on {plan.root} (MemTotal {gib:.1f} GiB)"


def run_show(args) -> int:
    plan = _plan(args)
    if args.json:
        print_json(plan.to_dict())
        return 0
    print(_header(plan))
    _table(plan.checks)
    _notes(plan)
    return 0


def _print_changes(plan) -> None:
    changes = plan.changes
    print(f"{_header(plan)}: {len(changes)} change(s)")
    for c in changes:
        print(f"  {c.setting.name}: {_short(c.current)} -> {c.setting.target}   # {c.setting.reason}")
    _notes(plan)


def run_plan(args) -> int:
    plan = _plan(args)
    if args.json:
        print_json({**plan.to_dict(), "changes": [c.to_dict() for c in plan.changes]})
        return 0
    _print_changes(plan)
    return 0


def run_apply(args) -> int:
    from kernel_tuning import apply_plan

    plan = _plan(args)
    result = apply_plan(plan, state_dir=args.state_dir, dry_run=args.dry_run)
    if args.json:
        print_json(result.to_dict())
    elif args.dry_run:
        _print_changes(plan)
        print("dry run: nothing written")
    elif result.journal is None:
        print(f"{_header(plan)}: already compliant, nothing to do")
    else:
        print(f"applied {len(result.applied)} setting(s): {', '.join(result.applied)}")
        print(f"journal {result.journal.id} (undo: floodgate tune rollback --journal {result.journal.id})")
        for d in result.still_drifting:
            print(f"still drifting after apply: {d['name']} reads {d['current']}, wanted {d['target']}")
    return 1 if result.still_drifting else 0


def run_verify(args) -> int:
    plan = _plan(args)
    if args.json:
        d = plan.to_dict()
        print_json({"compliant": d["compliant"], "profile": d["profile"], "settings": d["settings"]})
    else:
        print(_header(plan))
        _table(plan.checks)
        _notes(plan)
        print("compliant" if plan.compliant else f"drift: {len(plan.changes)} setting(s)")
    return 0 if plan.compliant else 1


def run_rollback(args) -> int:
    from kernel_tuning import journal, rollback

    if args.list:
        directory = journal.journal_dir(args.root, args.state_dir)
        found = journal.list_journals(directory)
        if args.json:
            print_json([{"id": j.id, "profile": j.profile, "status": j.status,
                         "created": j.created, "paths": len(j.entries)} for j in found])  # fmt: skip
        else:
            for j in found:
                print(f"{j.id}  {j.status:<15}  {len(j.entries)} path(s)")
            if not found:
                print(f"no journals in {directory}")
        return 0
    result = rollback(args.root, args.journal, state_dir=args.state_dir)
    if args.json:
        print_json(result.to_dict())
    else:
        print(f"rolled back {result.journal.id}: restored {len(result.restored)} path(s)")
        for c in result.changed_since_apply:
            print(f"note: changed after the apply, restored anyway: {c}")
        for m in result.mismatches:
            print(f"differs after restore: {m}")
    return 1 if result.mismatches else 0


def run_persist(args) -> int:
    from kernel_tuning import persist_plan

    plan = _plan(args)
    result = persist_plan(plan, dry_run=args.dry_run)
    if args.json:
        print_json(result.to_dict())
    else:
        for path, content in result.files.items():
            if args.dry_run:
                print(f"==> {path}\n{content}")
            else:
                print(f"wrote {result.root.rstrip('/')}/{path}")
        for c in result.conflicts:
            who = "overrides ours" if c["wins"] == "theirs" else "is overridden by ours"
            print(f"conflict: {c['key']} = {c['value']} in {c['file']} {who} ({c['ours']})")
    return 1 if result.overridden else 0


def run_numa_exec(args) -> int:
    from kernel_tuning import exec_interleaved

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("give the command after --, e.g. floodgate tune numa-exec -- java -jar broker.jar")
    exec_interleaved(cmd)
    return 1  # exec only returns by raising
