"""Profiles: TOML data files with `include =` inheritance.

A profile file has a `description`, an optional `include` (a name or a list
of names, merged first, in order), and one table per plugin. Each setting is
an inline table with a `reason` and one way to state the target:

    "vm.swappiness" = { value = 1, reason = "..." }
    "fs.file-max" = { at_least = 1048576, reason = "..." }
    "vm.min_free_kbytes" = { ram_percent = 1.0, min = "64M", max = "3G", reason = "..." }
    "vm.dirty_ratio" = { skip = true }      # drop an inherited setting

Names resolve in the user profile dirs first (in order), then the built-ins,
so a user `broker.toml` overrides the built-in one by name.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from kernel_tuning.errors import ProfileError

BUILTIN_DIR = Path(__file__).parent / "profiles"
# Plugin tables in the order their settings are applied (restores run backwards).
PLUGIN_ORDER = ("sysctl", "scheduler", "thp", "numa", "limits")
TOP_LEVEL_KEYS = {"description", "include", *PLUGIN_ORDER}
SPEC_KEYS = {"value", "at_least", "ram_percent", "min", "max", "reason", "skip"}
TARGET_KEYS = ("value", "at_least", "ram_percent")


@dataclass
class Profile:
    name: str
    description: str
    # plugin -> {key: spec}; dicts keep first-definition order through merges.
    sections: dict[str, dict[str, dict]] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)


def search_dirs(profile_dirs=()) -> list[Path]:
    return [Path(d) for d in profile_dirs] + [BUILTIN_DIR]


def available_profiles(profile_dirs=()) -> list[str]:
    names: set[str] = set()
    for d in search_dirs(profile_dirs):
        if d.is_dir():
            names.update(p.stem for p in d.glob("*.toml"))
    return sorted(names)


def find_profile(name: str, profile_dirs=()) -> Path:
    if not name or "/" in name or name.startswith("."):
        raise ProfileError(f"bad profile name {name!r}")
    for d in search_dirs(profile_dirs):
        candidate = d / f"{name}.toml"
        if candidate.is_file():
            return candidate
    valid = ", ".join(available_profiles(profile_dirs)) or "none"
    raise ProfileError(f"unknown profile {name!r} (valid: {valid})")


def parse_profile_text(text: str, source: str) -> dict:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{source}: not valid TOML: {exc}") from None
    validate_raw(data, source)
    return data


def validate_raw(data: dict, source: str) -> None:
    unknown = sorted(set(data) - TOP_LEVEL_KEYS)
    if unknown:
        raise ProfileError(
            f"{source}: unknown table {unknown[0]!r} (valid: {', '.join(sorted(TOP_LEVEL_KEYS))})"
        )
    include = data.get("include", [])
    if not isinstance(include, str | list) or (
        isinstance(include, list) and not all(isinstance(i, str) for i in include)
    ):
        raise ProfileError(f"{source}: include must be a name or a list of names")
    for plugin in PLUGIN_ORDER:
        section = data.get(plugin, {})
        if not isinstance(section, dict):
            raise ProfileError(f"{source}: [{plugin}] must be a table")
        for key, spec in section.items():
            validate_spec(spec, f"{source}: {plugin} {key!r}")


def validate_spec(spec, where: str) -> None:
    if not isinstance(spec, dict):
        raise ProfileError(f"{where}: must be a table like {{ value = ..., reason = \"...\" }}")
    unknown = sorted(set(spec) - SPEC_KEYS)
    if unknown:
        raise ProfileError(
            f"{where}: unknown field {unknown[0]!r} (valid: {', '.join(sorted(SPEC_KEYS))})"
        )
    if spec.get("skip"):
        return
    targets = [k for k in TARGET_KEYS if k in spec]
    if len(targets) != 1:
        raise ProfileError(f"{where}: give exactly one of {', '.join(TARGET_KEYS)}")
    if not isinstance(spec.get("reason"), str) or not spec["reason"].strip():
        raise ProfileError(f"{where}: needs a one-line reason")


def merge(base: dict[str, dict[str, dict]], overlay: dict) -> None:
    """Overlay one parsed file onto merged sections, in place."""
    for plugin in PLUGIN_ORDER:
        for key, spec in overlay.get(plugin, {}).items():
            section = base.setdefault(plugin, {})
            if spec.get("skip"):
                section.pop(key, None)
            else:
                section[key] = dict(spec)


def load_profile(name: str, profile_dirs=()) -> Profile:
    """Load a profile and everything it includes (depth first, cycles refused)."""
    sections: dict[str, dict[str, dict]] = {}
    sources: list[str] = []
    description = ""

    def visit(n: str, chain: tuple[str, ...]) -> None:
        nonlocal description
        if n in chain:
            raise ProfileError(f"include cycle: {' -> '.join((*chain, n))}")
        path = find_profile(n, profile_dirs)
        data = parse_profile_text(path.read_text(), str(path))
        includes = data.get("include", [])
        for inc in [includes] if isinstance(includes, str) else includes:
            visit(inc, (*chain, n))
        merge(sections, data)
        sources.append(str(path))
        description = data.get("description", description)

    visit(name, ())
    return Profile(name=name, description=description, sections=sections, sources=sources)
