"""Which latency table a report reads: the coarsest one that serves it.

``latency_1m`` (minute rollups) serves windows that are whole minutes over a
range that starts and ends on a minute, on every day it holds; the 1 s
``latency`` table serves everything else (windows under a minute, ranges
cut mid-minute, days no one has compacted) and the drill-downs into single
seconds. Days are read off the ``date=`` folders through Hadoop's FileSystem,
so no Spark job runs and any URI Spark reads works.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

from spark_reports.errors import EmptyInput
from spark_reports.schema import LATENCY_1M_TABLE, LATENCY_TABLE, PARTITION_COLUMN

MINUTE_S = 60


@dataclass(frozen=True)
class LatencySource:
    table: str  # the table the report reads
    path: str
    seconds_path: str | None  # the 1 s table, for drill-downs; None when the log has none

    @property
    def rollup(self) -> bool:
        return self.table == LATENCY_1M_TABLE


def table_path(root: str, table: str) -> str:
    return f"{root.rstrip('/')}/{table}"


def list_days(spark, path: str) -> set[date]:
    """The days of a table: its ``date=YYYY-MM-DD`` folders holding at least one file."""
    from spark_reports.connect import local_only
    from spark_reports.preflight import table_days

    local = local_only(spark, path, "--input")
    if local is not None:  # a Connect client: no JVM here, the same folders locally
        return table_days(Path(local))
    jvm = spark._jvm
    jpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = jpath.getFileSystem(spark._jsc.hadoopConfiguration())
    if not fs.exists(jpath):
        return set()
    days = set()
    for status in fs.listStatus(jpath):
        name = status.getPath().getName()
        if not (status.isDirectory() and name.startswith(f"{PARTITION_COLUMN}=")):
            continue
        files = fs.listStatus(status.getPath())
        if any(f.isFile() and not f.getPath().getName().startswith((".", "_")) for f in files):
            try:
                days.add(date.fromisoformat(name.split("=", 1)[1]))
            except ValueError:
                continue  # not a partition of ours: Spark ignores it too
    return days


def on_minute(t: datetime | None) -> bool:
    return t is None or (t.second == 0 and t.microsecond == 0)


def in_range(days: set[date], start: datetime | None, end: datetime | None) -> set[date]:
    return {
        d for d in days if (start is None or d >= start.date()) and (end is None or d <= end.date())
    }


def minutes_serve(window_s: int | None, start: datetime | None, end: datetime | None) -> bool:
    """Whether minute rows can answer: whole-minute windows, a range cut on minutes."""
    whole = window_s is None or window_s % MINUTE_S == 0
    return whole and on_minute(start) and on_minute(end)


def pick_source(
    spark, root: str, start: datetime | None, end: datetime | None, window_s: int | None
) -> LatencySource:
    """The coarsest table that serves ``window_s`` (None: not chosen yet) over the range.

    Minute rows are used only when they cover every day the 1 s table has in
    the range: a day without them would silently be missing from the report.
    """
    seconds_path = table_path(root, LATENCY_TABLE)
    minutes_path = table_path(root, LATENCY_1M_TABLE)
    seconds = in_range(list_days(spark, seconds_path), start, end)
    minutes = in_range(list_days(spark, minutes_path), start, end)
    has_seconds = bool(seconds) or bool(list_days(spark, seconds_path))
    if minutes and seconds <= minutes and minutes_serve(window_s, start, end):
        return LatencySource(LATENCY_1M_TABLE, minutes_path, seconds_path if has_seconds else None)
    if not has_seconds and not minutes:
        raise EmptyInput(
            f"no metrics log at {seconds_path} (expected {seconds_path}/date=YYYY-MM-DD/*.parquet)"
        )
    if not has_seconds:
        raise EmptyInput(
            f"{seconds_path} is missing and {LATENCY_1M_TABLE}/ cannot serve this report: "
            "it needs whole-minute windows over a range that starts and ends on a minute"
        )
    return LatencySource(LATENCY_TABLE, seconds_path, seconds_path)
