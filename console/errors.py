"""How the command line turns failures into one line and an exit code.

Packages raise their own error family (`BrokerError`, `TuningError`, ...);
they are named here, not imported, so `floodgate --help` stays fast and no
package has to know about the console.
"""

from __future__ import annotations

import importlib

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

# One rule for every report that gives a verdict (`report heatmap`, `report capacity`),
# so either can gate a pipeline.
REPORT_EXIT_RULE = (
    "Exit status: 0 on PASS (or no data to judge), 1 on FAIL (the outputs are written either "
    "way) and when the report cannot be made (nothing written), 2 on bad usage (nothing started)."
)


class UsageError(Exception):
    """Bad input from the user: exit 2 with a one-line message."""


class CommandFailed(Exception):
    """The command ran and the answer is 'no' (exit 1), with a message."""


# "module:Class" of each package's base error. Listed rather than imported so
# that a package that fails to import cannot break every other command.
ERROR_FAMILIES = (
    "heatmap.errors:HeatmapError",
    "broker_core.errors:BrokerError",
    "fuse.errors:FuseError",
    "kernel_tuning.errors:TuningError",
    "capacity.errors:CapacityError",
    "spark_reports.errors:ReportError",
    "console.observability.errors:ObservabilityError",
)


def known_error_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [CommandFailed, OSError, ValueError]
    for spec in ERROR_FAMILIES:
        module_name, _, cls_name = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        cls = getattr(module, cls_name, None)
        if isinstance(cls, type):
            types.append(cls)
    return tuple(types)
