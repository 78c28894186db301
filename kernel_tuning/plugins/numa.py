"""NUMA memory policy of the broker: NUMAPolicy= in the broker unit's drop-in.

Memory policy belongs to a process, so the live part is `floodgate tune
numa-exec` (kernel_tuning.numa); this plugin makes the service start
interleaved and reports whether it will.
"""

from __future__ import annotations

from kernel_tuning import values
from kernel_tuning.errors import ProfileError
from kernel_tuning.hostfs import HostFS
from kernel_tuning.numa import online_nodes
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
from kernel_tuning.plugins.servicefiles import DROPIN, parse_dropin, render_dropin

POLICIES = ("default", "preferred", "bind", "interleave", "local")


class NumaPlugin(Plugin):
    kind = "numa"
    valid_keys = ("policy",)

    def settings(self, section: dict[str, dict], ctx: Context) -> list[Setting]:
        spec = section.get("policy")
        if spec is None:
            return []
        target, _ = values.resolve_target(spec, "numa 'policy'", ctx.mem_kb)
        if target not in POLICIES:
            raise ProfileError(f"numa policy {target!r} is not one of {', '.join(POLICIES)}")
        note = "applies when the broker starts (systemd NUMAPolicy=)"
        return [Setting("numa", "policy", target, spec["reason"], name="numa.policy", note=note)]

    def set(self, host: HostFS, setting: Setting, write: bool) -> Check:
        service = parse_dropin(host.read(DROPIN))
        current = service.get("NUMAPolicy", "default")
        if current == setting.target:
            return Check(setting, current, OK)
        if len(online_nodes(host)) == 1:
            # one node: every policy places memory on it, so there is nothing to change and
            # nothing to verify (planned, `tune verify` could never pass on such a host)
            return Check(setting, current, UNSUPPORTED,
                         detail="one NUMA node here: every memory policy is the same; left alone")
        service["NUMAPolicy"] = setting.target
        data = render_dropin(service)
        check = Check(setting, current, DRIFT, [Write(DROPIN, "file", data)])
        if write:
            host.write_file(DROPIN, data)
        return check
