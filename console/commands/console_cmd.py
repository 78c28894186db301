"""`floodgate console`: the Textual TUI on a live cluster (or Prometheus)."""

from __future__ import annotations

from console.commands.common import add_subparser, positive_float
from console.commands.status_cmd import add_source_args


def register(sub) -> None:
    parser = add_subparser(sub, "console", "live cluster health in the terminal (Textual TUI)")
    add_source_args(parser)
    parser.add_argument("--refresh", type=positive_float, metavar="SECONDS",
                        help="seconds between polls (default 1)")
    parser.add_argument("--profile", default="broker",
                        help="kernel tuning profile the Host screen verifies (broker)")
    parser.set_defaults(func=run)


def run(args) -> int:
    import logging

    from textual.logging import TextualHandler

    from console.config import config_from_args
    from console.tui.app import FloodgateApp

    cfg = config_from_args(args)
    # Textual owns the terminal: log records go to its devtools console, not over the screen.
    logging.basicConfig(level=logging.WARNING, handlers=[TextualHandler()], force=True)
    FloodgateApp(cfg).run()
    return 0
