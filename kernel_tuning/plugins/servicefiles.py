"""The two config files floodgate owns for per-process settings.

NUMA policy and resource limits belong to a process, not the kernel, so
they take effect when the broker starts: through a systemd drop-in for the
broker unit, and a limits.d file for sessions (`ulimit -n` in a shell).
floodgate owns both files whole, so they are rendered, never patched.
"""

from __future__ import annotations

BROKER_UNIT = "floodgate-broker.service"
DROPIN = f"etc/systemd/system/{BROKER_UNIT}.d/60-floodgate.conf"
LIMITS_FILE = "etc/security/limits.d/60-floodgate.conf"
HEADER = "# Written by `floodgate tune`; floodgate owns this file and rewrites it whole.\n"


def parse_dropin(text: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    section = ""
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, sep, value = line.partition("=")
        if sep and section == "Service":
            out[key.strip()] = value.strip()
    return out


def render_dropin(service: dict[str, str]) -> str:
    lines = [HEADER, "[Service]\n"] + [f"{k}={v}\n" for k, v in service.items()]
    return "".join(lines)


def parse_limits(text: str | None) -> dict[str, str]:
    """item -> value for domain "*"; soft and hard disagreeing shows as "soft/hard"."""
    soft: dict[str, str] = {}
    hard: dict[str, str] = {}
    for line in (text or "").splitlines():
        parts = line.split("#", 1)[0].split()
        if len(parts) != 4 or parts[0] != "*":
            continue
        _, kind, item, value = parts
        for table, wanted in ((soft, "soft"), (hard, "hard")):
            if kind in (wanted, "-"):
                table[item] = value
    out = {}
    for item in dict.fromkeys([*soft, *hard]):
        s, h = soft.get(item, "unset"), hard.get(item, "unset")
        out[item] = s if s == h else f"{s}/{h}"
    return out


def render_limits(items: dict[str, str]) -> str:
    lines = [HEADER]
    for item, value in items.items():
        lines.append(f"*\tsoft\t{item}\t{value}\n")
        lines.append(f"*\thard\t{item}\t{value}\n")
    return "".join(lines)
