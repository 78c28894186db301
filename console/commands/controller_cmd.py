"""`floodgate controller`: fail masters over, driving the group records in ZooKeeper. Its
flags and what it runs are the controller's own (broker_core.cluster.controller_command,
also `python -m broker_core controller`); this adds it to the `floodgate` command."""

from __future__ import annotations

from broker_core.cluster.controller_command import add_controller_arguments, run_controller
from broker_core.flags import ArgsError
from console.commands.common import add_subparser
from console.errors import UsageError


def register(sub) -> None:
    p = add_subparser(sub, "controller", "run a controller: promotes an in-sync slave when a "
                      "master's ZooKeeper session ends (several may run; one leads)")
    add_controller_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    try:
        return run_controller(args)
    except ArgsError as exc:
        raise UsageError(str(exc)) from None
