"""Block I/O scheduler of the data disk(s): DIR/sys/block/<dev>/queue/scheduler.

`deadline` (legacy single queue) and `mq-deadline` (blk-mq) are the same
scheduler to every check; the write uses whichever name the kernel offers.
"""

from __future__ import annotations

from kernel_tuning import values
from kernel_tuning.plugins.base import ChoiceKnobPlugin, Context, Setting


class SchedulerPlugin(ChoiceKnobPlugin):
    kind = "scheduler"
    valid_keys = ("data_disk",)
    aliases = {"deadline": "mq-deadline"}

    def settings(self, section: dict[str, dict], ctx: Context) -> list[Setting]:
        spec = section.get("data_disk")
        if spec is None:
            return []
        target, _ = values.resolve_target(spec, "scheduler 'data_disk'", ctx.mem_kb)
        if not ctx.devices:
            ctx.notes.append(
                f"scheduler: skipped (wanted {target}); name the data disk with --device or --data-dir"
            )
            return []
        return [
            Setting("scheduler", dev, target, spec["reason"], name=f"scheduler.{dev}")
            for dev in ctx.devices
        ]

    def knob(self, setting: Setting) -> str:
        return f"sys/block/{setting.key}/queue/scheduler"
