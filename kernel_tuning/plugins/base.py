"""The plugin template: every kind of setting is read, planned, applied,
verified and restored the same way.

The core is one setter, `set(host, setting, write)`. With write=False it
only reads the host and returns what it would write; plan and verify use
that, so they can never disagree with apply. With write=True it does it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernel_tuning.hostfs import HostFS

OK, DRIFT, UNSUPPORTED = "ok", "drift", "unsupported"


@dataclass(frozen=True)
class Setting:
    """One resolved target of a profile."""

    plugin: str
    key: str
    target: str
    reason: str
    mode: str = "exact"  # "exact", or "at_least" (numeric floors such as fs.file-max)
    name: str = ""  # what people see, e.g. "vm.swappiness", "scheduler.vda"
    note: str = ""  # e.g. how a key was translated for this kernel

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.key)


@dataclass(frozen=True)
class Write:
    """One write the setter wants: a knob value, a config file, or a removal."""

    path: str  # relative to the root
    kind: str  # "knob" or "file"
    data: str | None  # None removes a file


@dataclass
class Check:
    """The setter's answer for one setting: where the host stands, and the writes."""

    setting: Setting
    current: str | None
    status: str
    writes: list[Write] = field(default_factory=list)
    detail: str = ""

    def to_dict(self) -> dict:
        d = {
            "name": self.setting.name,
            "current": self.current,
            "target": self.setting.target,
            "mode": self.setting.mode,
            "status": self.status,
            "plugin": self.setting.plugin,
            "reason": self.setting.reason,
        }
        note = "; ".join(x for x in (self.setting.note, self.detail) if x)
        if note:
            d["note"] = note
        return d


def shown_target(target, mode: str | None = "exact") -> str:
    """A target as `tune show` and the console's Host screen write it: an at-least
    setting (a floor such as fs.file-max) with its comparator, ">= 1048576"."""
    text = "-" if target is None else str(target)
    return f">= {text}" if mode == "at_least" else text


@dataclass
class Context:
    """What plugins need to turn profile specs into settings."""

    host: HostFS
    mem_kb: int
    force: bool = False
    devices: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def parse_choice(text: str) -> tuple[str, list[str] | None]:
    """The selected value of a sysfs choice file, and the offered values.

    The kernel shows "none [mq-deadline] kyber"; a fake tree holds what was
    written ("mq-deadline"), so both are accepted; options are None then.
    """
    text = text.strip()
    if "[" not in text:
        return text, None
    options = [t.strip("[]") for t in text.split()]
    selected = next((t.strip("[]") for t in text.split() if t.startswith("[")), "")
    return selected, options


class Plugin:
    kind = ""
    valid_keys: tuple[str, ...] | None = None  # None: any key (sysctl)

    def settings(self, section: dict[str, dict], ctx: Context) -> list[Setting]:
        raise NotImplementedError

    def set(self, host: HostFS, setting: Setting, write: bool) -> Check:
        raise NotImplementedError

    def restore_value(self, raw: str) -> str:
        """What to write into a knob to bring back a value read as `raw`."""
        return raw


class ChoiceKnobPlugin(Plugin):
    """A sysfs file showing "a [b] c": the block scheduler and THP."""

    aliases: dict[str, str] = {}

    def knob(self, setting: Setting) -> str:
        raise NotImplementedError

    def canonical(self, value: str) -> str:
        return self.aliases.get(value, value)

    def set(self, host: HostFS, setting: Setting, write: bool) -> Check:
        path = self.knob(setting)
        raw = host.read(path)
        if raw is None:
            return Check(setting, None, UNSUPPORTED, detail=f"no {host.shown(path)}")
        current, options = parse_choice(raw)
        if self.canonical(current) == self.canonical(setting.target):
            return Check(setting, current, OK)
        value = setting.target
        if options is not None:
            offered = [o for o in options if self.canonical(o) == self.canonical(value)]
            if not offered:
                return Check(
                    setting, current, UNSUPPORTED,
                    detail=f"kernel offers {', '.join(options)}",
                )
            value = offered[0]
        check = Check(setting, current, DRIFT, [Write(path, "knob", value)])
        if write:
            host.write_knob(path, value)
        return check

    def restore_value(self, raw: str) -> str:
        return parse_choice(raw)[0]
