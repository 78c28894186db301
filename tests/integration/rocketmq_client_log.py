"""What the official RocketMQ client logged: it writes why a request failed to its own
log file and raises without it, so a test that meets such a failure quotes it."""

from __future__ import annotations

import logging


def client_errors(last: int = 3) -> str:
    """The client's last `last` ERROR lines, joined, from its log file."""
    for handler in logging.getLogger("rocketmq-python-client").handlers:
        if path := getattr(handler, "baseFilename", None):
            with open(path, encoding="utf-8", errors="replace") as f:
                errors = [line.strip() for line in f if "[ERROR]" in line]
            return " | ".join(errors[-last:]) or "no ERROR line"
    return "no log file"
