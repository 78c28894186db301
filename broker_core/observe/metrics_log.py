"""The broker's per-second metrics log: Parquet in DESIGN.md's schema.

Rows are buffered in memory and written as one closed file per table every
`roll_s` seconds (in a worker thread, off the broker's loop) and at shutdown: a hidden temp name first, then an atomic
rename to `part-<broker>-<first second>.parquet`, so Spark and DuckDB (which
skip names starting with "." or "_") only ever see complete files.

The schema is written out here rather than imported from spark_reports,
because broker_core may not depend on spark_reports (DESIGN.md's arrows);
tests/integration/test_metrics_log_contract.py holds the two equal.
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from broker_core.fsutil import fsync_path
from broker_core.observe.recorder import ClosedSecond
from broker_core.observe.snapshot import BrokerSnapshot

TS_TYPE = pa.timestamp("us", tz="UTC")
LATENCY_SCHEMA = pa.schema(
    [
        pa.field("ts", TS_TYPE),
        pa.field("cluster", pa.string()),
        pa.field("broker", pa.string()),
        pa.field("op", pa.string()),
        pa.field("count", pa.int64()),
        pa.field("sum_us", pa.int64()),
        pa.field("min_us", pa.int64()),
        pa.field("max_us", pa.int64()),
        pa.field("buckets", pa.map_(pa.int32(), pa.int64())),
        pa.field("msgs", pa.int64()),
        pa.field("bytes", pa.int64()),
    ]
)
BROKER_STATS_SCHEMA = pa.schema(
    [
        pa.field("ts", TS_TYPE),
        pa.field("cluster", pa.string()),
        pa.field("broker", pa.string()),
        pa.field("disk_used_bytes", pa.int64()),
        pa.field("disk_total_bytes", pa.int64()),
        pa.field("msgs_in_per_s", pa.float64()),
        pa.field("msgs_out_per_s", pa.float64()),
        pa.field("commit_offset", pa.int64()),
        pa.field("consumer_lag", pa.int64()),
    ]
)


def _us(seconds: float | None) -> int:
    return 0 if seconds is None else round(seconds * 1e6)


class MetricsLogWriter:
    def __init__(self, root: Path, cluster: str, broker: str, roll_s: float = 120.0) -> None:
        self.root = Path(root)
        self.cluster, self.broker = cluster, broker
        self.roll_s = roll_s
        self._latency: list[dict] = []
        self._stats: list[dict] = []
        self._first_ts: int | None = None
        self._rolling = threading.Lock()
        self.files_written = 0

    def add(self, snap: BrokerSnapshot, closed: Iterable[ClosedSecond]) -> None:
        """The seconds a tick closed, with the tick's snapshot's broker figures."""
        closed = list(closed)
        self.add_seconds(closed)
        lag = sum(snap.consumer_lag.values())
        for second in closed:
            self.add_stats(second.ts, snap.disk["used_bytes"], snap.disk["total_bytes"],
                           float(second.ops["send"].msgs), float(second.ops["pull"].msgs),
                           snap.commitlog["max_offset"], lag)

    def add_seconds(self, seconds: Iterable[ClosedSecond]) -> None:
        for second in seconds:
            ts = datetime.fromtimestamp(second.ts, tz=UTC)
            if self._first_ts is None:
                self._first_ts = second.ts
            for op, fig in second.ops.items():
                h = fig.hist
                if not h.count:
                    continue  # an idle op's second is no row: absence means zero
                self._latency.append(
                    {
                        "ts": ts,
                        "cluster": self.cluster,
                        "broker": self.broker,
                        "op": op,
                        "count": h.count,
                        "sum_us": _us(h.sum),
                        "min_us": _us(h.min),
                        "max_us": _us(h.max),
                        "buckets": list(h.buckets.items()),
                        "msgs": fig.msgs,
                        "bytes": fig.bytes,
                    }
                )

    def add_stats(
        self,
        ts: int,
        disk_used: int,
        disk_total: int,
        msgs_in: float,
        msgs_out: float,
        commit_offset: int,
        consumer_lag: int,
    ) -> None:
        if self._first_ts is None:
            self._first_ts = ts
        self._stats.append(
            {
                "ts": datetime.fromtimestamp(ts, tz=UTC),
                "cluster": self.cluster,
                "broker": self.broker,
                "disk_used_bytes": disk_used,
                "disk_total_bytes": disk_total,
                "msgs_in_per_s": msgs_in,
                "msgs_out_per_s": msgs_out,
                "commit_offset": commit_offset,
                "consumer_lag": consumer_lag,
            }
        )

    def due(self, now: float) -> bool:
        return self._first_ts is not None and now - self._first_ts >= self.roll_s

    def take(self) -> tuple[list[dict], list[dict]]:
        """Hand over what is buffered (for `roll` in another thread) and start anew."""
        taken = (self._latency, self._stats)
        self._latency, self._stats, self._first_ts = [], [], None
        return taken

    def roll(self, taken: tuple[list[dict], list[dict]] | None = None) -> list[Path]:
        """Write rows as closed files (what is buffered, or what `take` handed
        over; safe in a worker thread then); returns their paths."""
        latency, stats = taken if taken is not None else self.take()
        written = []
        with self._rolling:  # the shutdown roll waits for one still running in a thread
            for table, rows, schema in (
                ("latency", latency, LATENCY_SCHEMA),
                ("broker_stats", stats, BROKER_STATS_SCHEMA),
            ):
                by_date: dict[str, list[dict]] = defaultdict(list)
                for row in rows:
                    by_date[row["ts"].strftime("%Y-%m-%d")].append(row)
                for day, day_rows in sorted(by_date.items()):
                    written.append(self._write(table, day, day_rows, schema))
        return written

    def _write(self, table: str, day: str, rows: list[dict], schema: pa.Schema) -> Path:
        folder = self.root / table / f"date={day}"
        folder.mkdir(parents=True, exist_ok=True)
        first = int(rows[0]["ts"].timestamp())
        final = folder / f"part-{self.broker}-{first}.parquet"
        tmp = folder / f".{final.name}.tmp"
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
        fsync_path(tmp)
        os.replace(tmp, final)
        fsync_path(folder)
        self.files_written += 1
        return final
