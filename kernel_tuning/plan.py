"""A plan: every setting of a profile resolved for this host and checked.

Building a plan only reads the host: each plugin's setter runs in no-write
mode and says where the host stands and what it would write.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kernel_tuning import device as devices_mod
from kernel_tuning.errors import ProfileError
from kernel_tuning.hostfs import HostFS
from kernel_tuning.plugins import PLUGINS
from kernel_tuning.plugins.base import DRIFT, UNSUPPORTED, Check, Context, Setting
from kernel_tuning.profile import PLUGIN_ORDER, Profile, load_profile
from kernel_tuning.values import mem_total_kb


@dataclass
class Plan:
    profile: Profile
    root: str
    mem_kb: int
    checks: list[Check]
    devices: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def changes(self) -> list[Check]:
        return [c for c in self.checks if c.status == DRIFT]

    @property
    def compliant(self) -> bool:
        return not self.changes

    def to_dict(self) -> dict:
        return {
            "profile": self.profile.name,
            "root": self.root,
            "mem_total_kb": self.mem_kb,
            "devices": self.devices,
            "compliant": self.compliant,
            "settings": [c.to_dict() for c in self.checks],
            "notes": self.notes,
        }


def resolve_devices(host: HostFS, device: str | None, data_dir: str | None) -> list[str]:
    found: list[str] = []
    if device:
        found += devices_mod.disks_for_device(host, device)
    if data_dir:
        found += devices_mod.disks_for_data_dir(host, data_dir)
    return list(dict.fromkeys(found))


def resolve_settings(profile: Profile, ctx: Context) -> list[Setting]:
    settings: list[Setting] = []
    for kind in PLUGIN_ORDER:
        section = profile.sections.get(kind, {})
        plugin = PLUGINS[kind]
        if plugin.valid_keys is not None:
            for key in section:
                if key not in plugin.valid_keys:
                    raise ProfileError(
                        f"profile {profile.name!r}: unknown {kind} key {key!r} "
                        f"(valid: {', '.join(plugin.valid_keys)})"
                    )
        settings += plugin.settings(section, ctx)
    return settings


def check_settings(host: HostFS, settings: list[Setting]) -> list[Check]:
    return [PLUGINS[s.plugin].set(host, s, write=False) for s in settings]


def build_plan(
    profile: str | Profile,
    root: str | os.PathLike = "/",
    profile_dirs=(),
    device: str | None = None,
    data_dir: str | None = None,
    force: bool = False,
) -> Plan:
    host = HostFS(root)
    prof = profile if isinstance(profile, Profile) else load_profile(profile, profile_dirs)
    mem_kb = mem_total_kb(host)
    devs = resolve_devices(host, device, data_dir)
    ctx = Context(host=host, mem_kb=mem_kb, force=force, devices=devs)
    checks = check_settings(host, resolve_settings(prof, ctx))
    notes = list(ctx.notes)
    unsupported = [c.setting.name for c in checks if c.status == UNSUPPORTED]
    if unsupported:
        notes.append(f"unsupported on this host (left alone): {', '.join(unsupported)}")
    return Plan(prof, str(host.root), mem_kb, checks, devs, notes)
