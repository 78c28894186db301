"""A report's input checked before Spark starts (a JVM and Spark's first query cost ~10 s
before they could say the input was empty): the metrics log's layout, the days it
holds against the range and the target date asked for, the output directory. Each
check raises ReportError with one line.

Only local paths (or file: URIs) are looked at; a URI Spark reads through Hadoop
(hdfs://, s3a://) is left to Spark, which says what is wrong with it as before.
Deliberately light: no pyarrow, no pyspark import (the point is to answer in well
under a second).
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

from spark_reports.errors import ReportError

TABLES = ("latency", "latency_1m")  # spark_reports.schema's LATENCY_TABLE, LATENCY_1M_TABLE
PARTITION = "date="


def local_path(uri: str) -> Path | None:
    """The local path of a path or file: URI; None for a URI Spark reads elsewhere."""
    if uri.startswith("file://"):
        return Path(uri[len("file://"):])
    if "://" in uri:
        return None
    return Path(uri)


def table_days(folder: Path) -> set[date]:
    """The days of one table: its date= folders with a file in them (as
    sources.list_days finds them through Hadoop)."""
    days = set()
    if folder.is_dir():
        for part in folder.iterdir():
            if not (part.is_dir() and part.name.startswith(PARTITION)):
                continue
            if any(f.is_file() and not f.name.startswith((".", "_")) for f in part.iterdir()):
                try:
                    days.add(date.fromisoformat(part.name[len(PARTITION):]))
                except ValueError:
                    continue  # not a partition of ours: Spark ignores it too
    return days


def log_days(root: Path) -> dict[str, set[date]]:
    """table -> the days it holds."""
    return {table: table_days(root / table) for table in TABLES}


def check_input(uri: str) -> set[date] | None:
    """The days the log holds (None: not a local path, Spark will look)."""
    root = local_path(uri)
    if root is None:
        return None
    if not root.exists():
        raise ReportError(f"--input {uri}: no such directory")
    if not root.is_dir():
        raise ReportError(f"--input {uri}: not a directory (a metrics log is a directory with "
                          f"latency/date=YYYY-MM-DD/*.parquet)")
    days = log_days(root)
    every = days["latency"] | days["latency_1m"]
    if not every:
        raise ReportError(f"no metrics log at {root / 'latency'} (expected "
                          f"{root / 'latency'}/date=YYYY-MM-DD/*.parquet){_log_within(root)}")
    return every


def _log_within(root: Path) -> str:
    """Where the log is when `root` is a cluster's or a broker's data directory."""
    if (root / "metrics" / "latency").is_dir():  # `cluster up --data`, `broker serve --data`
        return f"; this looks like a data directory: its metrics log is {root / 'metrics'}"
    brokers = sorted(p.parent.parent.name for p in root.glob("*/metrics/latency"))
    if brokers:  # brokers each with their own log: the files carry their names
        return (f"; the brokers' logs are in {root}/NAME/metrics ({', '.join(brokers[:3])}"
                f"{', ...' if len(brokers) > 3 else ''}): give one, or merge them (the files "
                f"carry the broker's name): cp -r {root}/*/metrics/. ONE_DIR/")
    return ""


def check_range(days: set[date] | None, start: datetime | None, end: datetime | None) -> None:
    """Refuse a range that holds none of the log's days."""
    if not days or (start is None and end is None):
        return
    first, last = min(days), max(days)
    if (start is not None and start.date() > last) or (end is not None and end.date() < first) \
            or not any((start is None or d >= start.date()) and (end is None or d <= end.date())
                       for d in days):
        raise ReportError(f"--from/--to hold none of the log's days ({first} .. {last}, "
                          f"{len(days)} day(s))")


def check_target_date(days: set[date] | None, target: date) -> None:
    """A target before every day of the log is before the measured peak day."""
    if days and target < min(days):
        raise ReportError(f"--target-date {target} is before the log's first day "
                          f"({min(days)}), so before its peak day: plan for a later Double-11")


def check_out(uri: str, force: bool) -> None:
    """Refuse an output directory that holds anything, unless --force."""
    out = local_path(uri)
    if out is None or not out.exists():
        return
    if not out.is_dir():
        raise ReportError(f"--out {uri}: not a directory")
    if not force and any(out.iterdir()):
        raise ReportError(f"--out {uri} is not empty: give an empty or new directory, or "
                          f"--force to write over what is there")
