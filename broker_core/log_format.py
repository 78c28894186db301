"""One format for the log lines of every floodgate process (brokers, controllers, the
demo and its clients): the time first and the fields named, so that the logs of several
processes read side by side."""

from __future__ import annotations

import logging
import sys

FORMAT = "%(asctime)s level=%(levelname)s logger=%(name)s %(message)s"


def configure_logging(level: str | int = "INFO", **where) -> None:
    """Structured one-liners on stderr, or where `where` says (filename=..., force=True)."""
    if "filename" not in where:
        where.setdefault("stream", sys.stderr)
    logging.basicConfig(level=level, format=FORMAT, **where)
