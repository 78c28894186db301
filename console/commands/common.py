"""Small helpers shared by command modules."""

from __future__ import annotations

import json
import sys
from typing import Any


def add_subparser(sub, name: str, help_text: str, **kwargs):
    """Add a subcommand whose bare form (`floodgate NAME`) prints its help."""
    parser = sub.add_parser(name, help=help_text, description=help_text, **kwargs)
    parser.set_defaults(_parser=parser, func=None)
    return parser


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")
