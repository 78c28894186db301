"""Make a profile survive a reboot: sysctl.d, a udev rule, tmpfiles.d for THP, a
systemd drop-in and limits.d.

Files are rendered from the plan's targets (what the kernel of this host
accepts, under the names it uses) and reported against other sysctl.d
entries for the same keys, in the order `sysctl --system` reads them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kernel_tuning.errors import HostError
from kernel_tuning.hostfs import HostFS
from kernel_tuning.plan import Plan
from kernel_tuning.plugins.base import UNSUPPORTED, Check, parse_choice
from kernel_tuning.plugins.limits import DIRECTIVES, systemd_value
from kernel_tuning.plugins.servicefiles import (
    DROPIN,
    HEADER,
    LIMITS_FILE,
    render_dropin,
    render_limits,
)

# Read by `sysctl --system` in this order; a basename in an earlier dir masks later ones.
SYSCTL_DIRS = ("etc/sysctl.d", "run/sysctl.d", "usr/local/lib/sysctl.d", "usr/lib/sysctl.d", "lib/sysctl.d")
UDEV_RULE = "etc/udev/rules.d/60-floodgate-scheduler.rules"
# THP has no sysctl; systemd-tmpfiles writes sysfs at boot ("w" lines).
THP_TMPFILES = "etc/tmpfiles.d/60-floodgate-thp.conf"


def sysctl_conf_path(profile: str) -> str:
    return f"etc/sysctl.d/60-floodgate-{profile}.conf"


@dataclass
class PersistResult:
    files: dict[str, str]  # relative path -> content
    conflicts: list[dict] = field(default_factory=list)
    written: bool = False
    root: str = "/"

    @property
    def overridden(self) -> list[dict]:
        return [c for c in self.conflicts if c["wins"] == "theirs"]

    def to_dict(self) -> dict:
        return {
            "written": self.written,
            "files": [os.path.join(self.root, p) for p in self.files],
            "conflicts": self.conflicts,
        }


def usable(plan: Plan, plugin: str) -> list[Check]:
    return [c for c in plan.checks if c.setting.plugin == plugin and c.status != UNSUPPORTED]


def render_sysctl(plan: Plan) -> str:
    lines = [f"# Written by `floodgate tune persist --profile {plan.profile.name}`.\n"]
    for c in usable(plan, "sysctl"):
        s = c.setting
        if s.mode == "at_least" and c.status == "ok":
            lines.append(f"# {s.key}: already {c.current} >= {s.target} here; not pinned lower\n")
            continue
        lines.append(f"# {s.reason}\n{s.key} = {s.target}\n")
    return "".join(lines)


def scheduler_name(host: HostFS, check: Check) -> str:
    """The scheduler name this kernel offers for the target (deadline vs mq-deadline)."""
    raw = host.read(f"sys/block/{check.setting.key}/queue/scheduler") or ""
    _, options = parse_choice(raw)
    plugin_aliases = {"deadline": "mq-deadline"}
    want = plugin_aliases.get(check.setting.target, check.setting.target)
    for option in options or []:
        if plugin_aliases.get(option, option) == want:
            return option
    return check.setting.target


def render_udev(host: HostFS, checks: list[Check]) -> str:
    lines = [HEADER]
    for c in checks:
        dev = c.setting.key
        name = scheduler_name(host, c)
        own = (host.read(f"sys/block/{dev}/wwid") or "").strip()
        parent = (host.read(f"sys/block/{dev}/device/wwid") or "").strip()
        if own:
            match = f'ATTR{{wwid}}=="{own}"'
        elif parent:
            match = f'ATTRS{{wwid}}=="{parent}"'
        else:
            match = f'KERNEL=="{dev}"'
        lines.append(f"# {dev}: {c.setting.reason}\n")
        lines.append(
            f'ACTION=="add|change", SUBSYSTEM=="block", ENV{{DEVTYPE}}=="disk", {match}, '
            f'ATTR{{queue/scheduler}}="{name}"\n'
        )
    return "".join(lines)


def render_files(plan: Plan) -> dict[str, str]:
    host = HostFS(plan.root)
    files = {sysctl_conf_path(plan.profile.name): render_sysctl(plan)}
    schedulers = usable(plan, "scheduler")
    if schedulers:
        files[UDEV_RULE] = render_udev(host, schedulers)
    thp = usable(plan, "thp")
    if thp:
        files[THP_TMPFILES] = HEADER + "".join(
            f"# {c.setting.reason}\nw /sys/kernel/mm/transparent_hugepage/{c.setting.key} - - - - "
            f"{c.setting.target}\n"
            for c in thp
        )
    service: dict[str, str] = {}
    for c in usable(plan, "numa"):
        service["NUMAPolicy"] = c.setting.target
    limits = {c.setting.key: c.setting.target for c in usable(plan, "limits")}
    for item, value in limits.items():
        service[DIRECTIVES[item]] = systemd_value(value)
    if service:
        files[DROPIN] = render_dropin(service)
    if limits:
        files[LIMITS_FILE] = render_limits(limits)
    return files


def parse_sysctl_conf(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        key, sep, value = line.partition("=")
        if sep:
            out[normalize_key(key)] = " ".join(value.split())
    return out


def normalize_key(key: str) -> str:
    return key.strip().lstrip("-").replace("/", ".")


def sysctl_read_order(host: HostFS) -> list[str]:
    """Config files in the order `sysctl --system` applies them (last one wins)."""
    chosen: dict[str, str] = {}
    for d in SYSCTL_DIRS:
        for name in host.listdir(d):
            if name.endswith(".conf") and name not in chosen:
                chosen[name] = f"{d}/{name}"
    order = [chosen[name] for name in sorted(chosen)]
    if host.exists("etc/sysctl.conf"):
        order.append("etc/sysctl.conf")
    return order


def find_conflicts(host: HostFS, ours_path: str, ours: dict[str, str]) -> list[dict]:
    order = sysctl_read_order(host)
    if ours_path not in order:
        name = os.path.basename(ours_path)
        order = [p for p in order if os.path.basename(p) != name] + [ours_path]
        order.sort(key=lambda p: (p == "etc/sysctl.conf", os.path.basename(p)))
    mine = order.index(ours_path)
    conflicts = []
    for i, path in enumerate(order):
        if path == ours_path:
            continue
        for key, value in parse_sysctl_conf(host.read(path) or "").items():
            if key in ours and value.split() != ours[key].split():
                conflicts.append(
                    {"key": key, "file": host.shown(path), "value": value, "ours": ours[key],
                     "wins": "theirs" if i > mine else "ours"}
                )
    return conflicts


def persist_plan(plan: Plan, dry_run: bool = False) -> PersistResult:
    host = HostFS(plan.root)
    files = render_files(plan)
    ours_path = sysctl_conf_path(plan.profile.name)
    conflicts = find_conflicts(host, ours_path, parse_sysctl_conf(files[ours_path]))
    result = PersistResult(files, conflicts, root=str(host.root))
    if dry_run:
        return result
    blocked = [host.shown(p) for p in files if not host.writable(p)]
    if blocked:
        who = "need root to write" if os.geteuid() != 0 else "cannot write (read-only)"
        raise HostError(f"{who}: {', '.join(blocked)}")
    for path, content in files.items():
        host.write_file(path, content)
    result.written = True
    return result
