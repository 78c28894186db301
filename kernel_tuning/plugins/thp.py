"""Transparent hugepages: DIR/sys/kernel/mm/transparent_hugepage/{enabled,defrag}."""

from __future__ import annotations

from kernel_tuning import values
from kernel_tuning.plugins.base import ChoiceKnobPlugin, Context, Setting

THP_DIR = "sys/kernel/mm/transparent_hugepage"


class ThpPlugin(ChoiceKnobPlugin):
    kind = "thp"
    valid_keys = ("enabled", "defrag")

    def settings(self, section: dict[str, dict], ctx: Context) -> list[Setting]:
        out = []
        for key, spec in section.items():
            target, _ = values.resolve_target(spec, f"thp {key!r}", ctx.mem_kb)
            out.append(Setting("thp", key, target, spec["reason"], name=f"thp.{key}"))
        return out

    def knob(self, setting: Setting) -> str:
        return f"{THP_DIR}/{setting.key}"
