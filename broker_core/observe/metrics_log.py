"""The broker's per-second metrics log: Parquet in the schema of docs/architecture.md.

Rows are buffered in memory and written as one closed file per table every
`roll_s` seconds (in a worker thread, off the broker's loop) and at shutdown: a hidden temp name first, then an atomic
rename to `part-<broker>-<first second>.parquet`, so Spark and DuckDB (which
skip names starting with "." or "_") only ever see complete files.

The contract (schemas, rows, partition layout) is heatmap.metrics_log's, the
one spark_reports reads with: written once, so the two cannot drift apart.
Each minute's rollup (latency_1m) is made as the minute closes and rolled with
the seconds; at shutdown the open minute is written as it stands (a restarted
broker's rows of the same minute add up in any reader).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from broker_core.fsutil import publish
from broker_core.observe.recorder import ClosedSecond
from broker_core.observe.snapshot import BrokerSnapshot
from heatmap.metrics_log import (
    BROKER_STATS_TABLE,
    LATENCY_1M_TABLE,
    LATENCY_TABLE,
    SCHEMAS,
    broker_stats_row,
    latency_row,
    partition_dir,
)
from heatmap.rollup import MinuteRollup


def row_time(epoch_s: int) -> datetime:
    return datetime.fromtimestamp(epoch_s, tz=UTC)


class MetricsLogWriter:
    def __init__(self, root: Path, cluster: str, broker: str, roll_s: float = 120.0) -> None:
        self.root = Path(root)
        self.cluster, self.broker = cluster, broker
        self.roll_s = roll_s
        self._latency: list[dict] = []
        self._stats: list[dict] = []
        self._minutes = MinuteRollup()
        self._latency_1m: list[dict] = []
        self._first_ts: int | None = None
        self._rolling = threading.Lock()
        self.files_written = 0

    @staticmethod
    def warm() -> None:
        """Load now what the first roll would (a broker calls this before it serves).

        pyarrow converts rows through pandas' type checks when pandas is installed and
        imports it on first use: 0.14 s with bytecode caches, 0.7 s without (py-spy, a
        demo broker), much of it holding the GIL, in the roll's worker thread while the
        loop serves; and modules loaded after start-up are not in the frozen
        generation, so each later full collection would walk them on the loop."""
        for schema in SCHEMAS.values():
            pq.write_table(pa.Table.from_pylist([], schema=schema), pa.BufferOutputStream())

    def add(self, snap: BrokerSnapshot, closed: Iterable[ClosedSecond]) -> None:
        """The seconds a tick closed, with the tick's snapshot's broker figures."""
        closed = list(closed)
        self.add_seconds(closed)
        lag = sum(snap.consumer_lag.values())
        for second in closed:
            self.add_stats(second.ts, snap.disk.used_bytes, snap.disk.total_bytes,
                           float(second.ops["send"].msgs), float(second.ops["pull"].msgs),
                           snap.commitlog.max_offset, lag)

    def add_seconds(self, seconds: Iterable[ClosedSecond]) -> None:
        for second in seconds:
            if self._first_ts is None:
                self._first_ts = second.ts
            for op, fig in second.ops.items():
                if fig.hist.count:  # an idle op's second is no row: absence means zero
                    row = latency_row(second.ts, self.cluster, self.broker, op,
                                      fig.hist, fig.msgs, fig.bytes)
                    self._latency.append(row)
                    self._minutes.add(row)
            if len(self._minutes):  # a minute that ended with this second is complete
                self._latency_1m += self._minutes.close_before(row_time(second.ts + 1))

    def add_stats(self, ts: int, disk_used: int, disk_total: int, msgs_in: float,
                  msgs_out: float, commit_offset: int, consumer_lag: int) -> None:
        if self._first_ts is None:
            self._first_ts = ts
        self._stats.append(broker_stats_row(ts, self.cluster, self.broker, disk_used,
                                            disk_total, msgs_in, msgs_out, commit_offset,
                                            consumer_lag))

    @property
    def first_ts(self) -> int | None:
        """The first second buffered (None: nothing is)."""
        return self._first_ts

    def due(self, now: float) -> bool:
        return self._first_ts is not None and now - self._first_ts >= self.roll_s

    def take(self, open_minute: bool = False) -> tuple[list[dict], list[dict], list[dict]]:
        """Hand over what is buffered (for `roll` in another thread) and start anew;
        with ``open_minute`` the minute still open is handed over too (shutdown)."""
        if open_minute:
            self._latency_1m += self._minutes.drain()
        taken = (self._latency, self._stats, self._latency_1m)
        self._latency, self._stats, self._latency_1m, self._first_ts = [], [], [], None
        return taken

    def roll(self, taken: tuple[list[dict], ...] | None = None) -> list[Path]:
        """Write rows as closed files (what is buffered, or what `take` handed
        over; safe in a worker thread then); returns their paths. Without
        ``taken`` (shutdown) the open minute is written too."""
        latency, stats, latency_1m = taken if taken is not None else self.take(open_minute=True)
        written = []
        tables = ((LATENCY_TABLE, latency), (BROKER_STATS_TABLE, stats),
                  (LATENCY_1M_TABLE, latency_1m))  # fmt: skip
        with self._rolling:  # the shutdown roll waits for one still running in a thread
            for table, rows in tables:
                by_date: dict[date, list[dict]] = defaultdict(list)
                for row in rows:
                    by_date[row["ts"].date()].append(row)
                for day, day_rows in sorted(by_date.items()):
                    written.append(self._write(table, day, day_rows))
        return written

    def _write(self, table: str, day: date, rows: list[dict]) -> Path:
        folder = self.root / partition_dir(table, day)
        folder.mkdir(parents=True, exist_ok=True)
        first = int(rows[0]["ts"].timestamp())
        final = folder / f"part-{self.broker}-{first}.parquet"
        n = 0
        while final.exists():  # a restart within a minute writes that minute again: keep both
            n += 1
            final = folder / f"part-{self.broker}-{first}-{n}.parquet"
        tmp = folder / f".{final.name}.tmp"
        pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMAS[table]), tmp)
        publish(tmp, final)
        self.files_written += 1
        return final
