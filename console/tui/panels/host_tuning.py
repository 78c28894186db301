"""This host against a kernel_tuning profile (verify: nothing written)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

STATUS_STYLE = {"ok": "green", "drift": "yellow", "unsupported": "dim"}


def render(state, focus=None):
    from kernel_tuning.plugins.base import shown_target  # (the package: 30 ms, when shown)

    tuning = (state.host or {}).get("tuning")
    if not tuning:
        return Text("host not sampled yet", style="dim")
    if tuning.get("error"):
        return Text(f"profile {tuning.get('profile')}: {tuning['error']}", style="red")
    settings = [s for s in tuning.get("settings") or [] if isinstance(s, dict)]
    drift = sum(1 for s in settings if s.get("status") == "drift")
    head = Text(f"profile {tuning.get('profile')}: ", style="bold")
    head.append("compliant" if tuning.get("compliant") else f"{drift} setting(s) drift",
                style="green" if tuning.get("compliant") else "yellow")
    head.append("  (fix: floodgate tune apply)", style="dim")
    table = Table(box=None, header_style="bold", pad_edge=False)
    for label in ("setting", "current", "target", "status"):
        table.add_column(label)
    order = {"drift": 0, "unsupported": 2}
    for s in sorted(settings, key=lambda s: order.get(s.get("status"), 1)):
        status = str(s.get("status"))
        # the comparator `tune show` writes: an at-least setting's target is ">= N"
        table.add_row(str(s.get("name")), str(s.get("current")),
                      shown_target(s.get("target"), s.get("mode")),
                      Text(status, style=STATUS_STYLE.get(status, "")))
    return Group(head, table)
