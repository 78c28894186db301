"""An operator's commands that change a cluster go in its events log (broker_core.observe
.events) with their outcome: the post-mortem's timeline shows the offset reset at 00:14
beside the alert it answered. Only commands given `--cluster FILE` know where the log is;
read-only commands (show, list, status, trace, reports) are not written.
"""

from __future__ import annotations

import getpass
import logging
import shlex

log = logging.getLogger("floodgate")

# (command, verb or None for any) -> the event's kind; verbs absent here only read
CHANGES = {
    ("offsets", "reset"): "offsets",
    ("quota", "set"): "quota", ("quota", "clear"): "quota", ("quota", "apply"): "quota",
    ("fault", "inject"): "fault", ("fault", "clear"): "fault", ("fault", "net"): "fault",
    ("topic", "create"): "command", ("topic", "update"): "command",
    ("topic", "delete"): "command", ("topic", "wipe-write"): "command",
    ("topic", "restore-write"): "command",
    ("dlq", "resend"): "command", ("tx", "resolve"): "command",
    ("acl", "user"): "command", ("acl", "allow"): "command", ("acl", "deny"): "command",
    ("acl", "remove"): "command",
    ("drill", None): "drill",
}


READS = {"list", "show"}  # `acl user list`: a verb under a verb that only reads


def kind_of(command: str | None, argv: list[str]) -> str | None:
    """The event kind of `floodgate COMMAND VERB ...` as typed, or None (it only reads)."""
    if command not in argv:
        return None
    words = [w for w in argv[argv.index(command) + 1:][:2] if not w.startswith("-")]
    if READS & set(words):
        return None
    verb = words[0] if words else None
    return CHANGES.get((command, verb)) or CHANGES.get((command, None))


def record(args, argv: list[str], code: int) -> None:
    """Append the command and its exit code to its cluster's events log, if it changed
    (or tried to change) one; never fails the command."""
    kind = kind_of(getattr(args, "command", None), argv)
    cluster = getattr(args, "cluster", None)
    if kind is None or not cluster:
        return
    from broker_core.observe.events import EventLog, events_path_of

    line = "floodgate " + shlex.join(argv)
    outcome = "done" if code == 0 else f"failed (exit {code})"
    # a command may say what it measured (a drill: lost, duplicated, failover time)
    fields = getattr(args, "event_fields", None) or {}
    measured = ", ".join(_said(k, v) for k, v in fields.items() if v is not None)
    try:
        EventLog(events_path_of(cluster), "command").append(
            kind, f"{line}: {outcome}" + (f" ({measured})" if measured else ""),
            severity="info" if code == 0 else "warning", subject=args.command, user=_user(),
            exit=code, **fields)
    except OSError as exc:
        log.warning("events log beside %s: %s", cluster, exc)


def _said(key: str, value) -> str:
    """`failover_s`, 0.412 -> "failover 0.412 s"; `lost`, 0 -> "lost 0"."""
    if key.endswith("_s"):
        return f"{key[:-2].replace('_', ' ')} {value:g} s"
    return f"{key.replace('_', ' ')} {value}"


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return "?"
