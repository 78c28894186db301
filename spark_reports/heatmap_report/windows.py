"""Heatmap windows: parsing --window and the default for a range. Pure (no pyspark,
no pandas), so a command can check its options before anything heavy is imported."""

from __future__ import annotations

import re

from spark_reports.errors import ReportError

WINDOW_CHOICES_S = (1, 5, 10, 30, 60, 300, 600)
MAX_COLUMNS = 720  # default windows: at most this many heatmap columns


def parse_window(text: str) -> int:
    """'1s', '10s', '1m', '5m', '1h' or plain seconds -> seconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([smh]?)\s*", text or "")
    if not m or int(m.group(1)) == 0:
        raise ReportError(f"--window: expected a duration like 1s, 10s, 1m, 5m, got {text!r}")
    seconds = int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]
    if seconds > 86400:
        raise ReportError(f"--window: at most 1 day, got {text!r}")
    return seconds


def choose_window_s(range_s: float) -> int:
    """The finest standard window that keeps a heatmap within MAX_COLUMNS columns."""
    for w in WINDOW_CHOICES_S:
        if range_s / w <= MAX_COLUMNS:
            return w
    return WINDOW_CHOICES_S[-1]
