"""One plugin per kind of setting, in the order they are applied."""

from __future__ import annotations

from kernel_tuning.plugins.base import Plugin
from kernel_tuning.plugins.limits import LimitsPlugin
from kernel_tuning.plugins.numa import NumaPlugin
from kernel_tuning.plugins.scheduler import SchedulerPlugin
from kernel_tuning.plugins.sysctl import SysctlPlugin
from kernel_tuning.plugins.thp import ThpPlugin

PLUGINS: dict[str, Plugin] = {
    p.kind: p for p in (SysctlPlugin(), SchedulerPlugin(), ThpPlugin(), NumaPlugin(), LimitsPlugin())
}
