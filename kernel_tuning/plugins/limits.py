"""Resource limits of the broker: LimitX= in the unit drop-in and a limits.d file."""

from __future__ import annotations

from kernel_tuning import values
from kernel_tuning.errors import ProfileError
from kernel_tuning.hostfs import HostFS
from kernel_tuning.plugins.base import DRIFT, OK, Check, Context, Plugin, Setting, Write
from kernel_tuning.plugins.servicefiles import (
    DROPIN,
    LIMITS_FILE,
    parse_dropin,
    parse_limits,
    render_dropin,
    render_limits,
)

# limits.conf item -> systemd directive
DIRECTIVES = {"nofile": "LimitNOFILE", "memlock": "LimitMEMLOCK", "nproc": "LimitNPROC"}


def systemd_value(value: str) -> str:
    return "infinity" if value == "unlimited" else value


def limits_value(value: str) -> str:
    return "unlimited" if value == "infinity" else value


class LimitsPlugin(Plugin):
    kind = "limits"
    valid_keys = tuple(DIRECTIVES)

    def settings(self, section: dict[str, dict], ctx: Context) -> list[Setting]:
        out = []
        for key, spec in section.items():
            target, _ = values.resolve_target(spec, f"limits {key!r}", ctx.mem_kb)
            if target != "unlimited" and not target.isdigit():
                raise ProfileError(f"limits {key!r}: {target!r} is not a number or 'unlimited'")
            out.append(
                Setting(
                    "limits", key, target, spec["reason"], name=f"limits.{key}",
                    note="applies to new sessions and at broker start",
                )
            )
        return out

    def set(self, host: HostFS, setting: Setting, write: bool) -> Check:
        directive = DIRECTIVES[setting.key]
        service = parse_dropin(host.read(DROPIN))
        session = parse_limits(host.read(LIMITS_FILE))
        in_unit = limits_value(service.get(directive, "unset"))
        in_session = session.get(setting.key, "unset")
        current = in_unit if in_unit == in_session else f"unit {in_unit}, limits.d {in_session}"
        writes = []
        if in_unit != setting.target:
            service[directive] = systemd_value(setting.target)
            writes.append(Write(DROPIN, "file", render_dropin(service)))
        if in_session != setting.target:
            session[setting.key] = setting.target
            writes.append(Write(LIMITS_FILE, "file", render_limits(session)))
        if not writes:
            return Check(setting, current, OK)
        if write:
            for w in writes:
                host.write_file(w.path, w.data or "")
        return Check(setting, current, DRIFT, writes)
