"""Block I/O scheduler of the data disk(s): DIR/sys/block/<dev>/queue/scheduler.

`deadline` (legacy single queue) and `mq-deadline` (blk-mq) are the same
scheduler to every check; the write uses whichever name the kernel offers.

Where `floodgate capacity backlog` measured the disk (MEASURED, per device), the
setting's reason is that measurement, not the profile's citation, and a note of the
plan's says when the measurement favours another scheduler (compliant or not).
"""

from __future__ import annotations

import json

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
        measured = measurements(ctx.host)
        out = []
        for dev in ctx.devices:
            m = measured.get(dev)
            reason, note = (spec["reason"], "") if m is None else measured_reason(m, target)
            if note:
                ctx.notes.append(f"scheduler.{dev}: {note}, not the profile's {target}")
            out.append(Setting("scheduler", dev, target, reason, name=f"scheduler.{dev}"))
        return out

    def knob(self, setting: Setting) -> str:
        return f"sys/block/{setting.key}/queue/scheduler"


MEASURED = "var/lib/floodgate/scheduler-measured.json"  # written by `capacity backlog`


def measurements(host) -> dict:
    """device -> the backlog test's summary ({} when none, or unreadable)."""
    try:
        doc = json.loads(host.path(MEASURED).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def measured_reason(m: dict, target: str) -> tuple[str, str]:
    """(the reason in the measurement's words, a note when it favours another)."""
    runs = ", ".join(f"{r['scheduler']} p99 {r['send_p99_ms']:.3g} ms, consumers "
                     f"{r['consume_mb_s']:.3g} MB/s" for r in m.get("runs", []))
    reason = (f"measured on this host ({m.get('date', '?')}, `floodgate capacity backlog`: "
              f"{m.get('size', '?')}-byte sync sends while consumers read from disk): {runs}")
    best = m.get("best")
    same = {best, target} <= {"deadline", "mq-deadline"} or best == target
    note = "" if same or not best else f"the measurement favours {best}"
    return reason, note
