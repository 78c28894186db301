"""sysctl: values under /proc/sys, kernel-aware.

A key the kernel lacks is `unsupported`, not an error. vm.extra_free_kbytes
(a patch some kernels carry) becomes vm.watermark_scale_factor elsewhere.
"""

from __future__ import annotations

import difflib
import re

from kernel_tuning import values
from kernel_tuning.errors import ProfileError
from kernel_tuning.hostfs import HostFS
from kernel_tuning.plugins.base import (
    DRIFT,
    OK,
    UNSUPPORTED,
    Check,
    Context,
    Plugin,
    Setting,
    Write,
)

_KEY = re.compile(r"^[A-Za-z0-9_\-]+([./][A-Za-z0-9_\-]+)+$")


def sysctl_path(key: str) -> str:
    return "proc/sys/" + (key if "/" in key else key.replace(".", "/"))


class SysctlPlugin(Plugin):
    kind = "sysctl"

    def settings(self, section: dict[str, dict], ctx: Context) -> list[Setting]:
        out = []
        for key, spec in section.items():
            if not _KEY.match(key):
                raise ProfileError(f"sysctl key {key!r} is not a sysctl name like vm.swappiness")
            target, mode = values.resolve_target(spec, f"sysctl {key!r}", ctx.mem_kb)
            setting = Setting("sysctl", key, target, spec["reason"], mode)
            if key == "vm.min_free_kbytes":
                values.check_min_free(int(target), ctx.mem_kb, ctx.force)
            if key == "vm.extra_free_kbytes":
                setting = self.translate_extra_free(setting, ctx)
            out.append(setting)
        return out

    def translate_extra_free(self, setting: Setting, ctx: Context) -> Setting:
        host = ctx.host
        if host.exists(sysctl_path(setting.key)):
            return setting
        if not host.exists(sysctl_path("vm.watermark_scale_factor")):
            return setting  # neither: reported unsupported
        factor = values.extra_free_as_scale_factor(
            int(setting.target), ctx.mem_kb, values.watermark_scale_max(host)
        )
        return Setting(
            "sysctl",
            "vm.watermark_scale_factor",
            str(factor),
            # what the profile asked, in this kernel's terms (its reason named the key
            # it had asked for, which read as nonsense beside this one)
            f"{setting.reason}; as vm.extra_free_kbytes={setting.target} would",
            name="vm.watermark_scale_factor",
            note=f"from vm.extra_free_kbytes={setting.target}: this kernel has no extra_free_kbytes",
        )

    def set(self, host: HostFS, setting: Setting, write: bool) -> Check:
        path = sysctl_path(setting.key)
        raw = host.read(path)
        if raw is None:
            return Check(setting, None, UNSUPPORTED, detail=missing_key_detail(host, setting.key))
        current = " ".join(raw.split())
        if satisfied(current, setting):
            return Check(setting, current, OK)
        check = Check(setting, current, DRIFT, [Write(path, "knob", setting.target)])
        if write:
            host.write_knob(path, setting.target)
        return check


def satisfied(current: str, setting: Setting) -> bool:
    if setting.mode == "at_least":
        try:
            return int(current) >= int(setting.target)
        except ValueError:
            return False
    return current.split() == setting.target.split()


def missing_key_detail(host: HostFS, key: str) -> str:
    """Why a key is unsupported, with a close name when it looks like a typo."""
    path = sysctl_path(key)
    parent, _, leaf = path.rpartition("/")
    close = difflib.get_close_matches(leaf, host.listdir(parent), n=1, cutoff=0.8)
    if close:
        sep = "/" if "/" in key else "."
        return f"this kernel has no such key (did you mean {key.rpartition(sep)[0]}{sep}{close[0]}?)"
    return "this kernel has no such key"
