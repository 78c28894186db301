"""Stream a synthetic Double-11 metrics log to Parquet, chunk by chunk.

Each chunk (a few minutes of every broker) becomes one row group of the day's
file in each table; files are written under a hidden name and renamed into
place when the day is complete, so a reader never sees half a file. The
minutes a chunk completes are rolled up into ``latency_1m`` (a minute cut by
a chunk's end waits for the next chunk).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from heatmap import metrics_log
from heatmap.rollup import rollup_table
from spark_reports.errors import ReportError
from spark_reports.generator.buckets import synthesize
from spark_reports.generator.model import (
    FLUSHES_PER_S,
    OP_SHAPES,
    Double11Config,
    Night,
    body_median,
    plan_night,
    rng_for,
    send_rate,
    spike_grid,
    tail_share,
)

ROWS_PER_CHUNK = 60_000  # latency rows per row group: ~60 MB of work arrays
# Inside a row group the 1 s rows go broker by broker, in pages of PAGE_ROWS with a
# page index: a reader after a few brokers' minutes (the heatmap's drill-downs) then
# decodes a page or two of each row group it cannot skip, not all of it (Spark's
# Parquet reader skips pages by the column index). A broker's own log is one broker
# a file already (heatmap.metrics_log).
PAGE_ROWS = 1_000
LATENCY_ORDER = [("broker", "ascending"), ("ts", "ascending"), ("op", "ascending")]
DISK_TOTAL_BYTES = 12 * 2**40


@dataclass
class GenerateResult:
    out: str
    latency_rows: int
    broker_stats_rows: int
    bucket_entries: int
    files: int
    bytes_written: int
    seconds: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class _DayFiles:
    """One open ParquetWriter per table for the current UTC day."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.day: date | None = None
        self.writers: dict[str, tuple[pq.ParquetWriter, Path, Path]] = {}
        self.files: list[Path] = []

    def writer(self, table: str, day: date) -> pq.ParquetWriter:
        if day != self.day:
            self.close()
            self.day = day
        if table not in self.writers:
            folder = self.out / metrics_log.partition_dir(table, day)
            folder.mkdir(parents=True, exist_ok=True)
            final = folder / "part-00000.parquet"
            hidden = folder / ".part-00000.parquet.inprogress"
            writer = pq.ParquetWriter(hidden, metrics_log.SCHEMAS[table], write_page_index=True,
                                      max_rows_per_page=PAGE_ROWS)
            self.writers[table] = (writer, hidden, final)
        return self.writers[table][0]

    def close(self) -> None:
        for w, hidden, final in self.writers.values():
            w.close()
            hidden.replace(final)
            self.files.append(final)
        self.writers = {}

    def abort(self) -> None:
        """Interrupted: nothing half written stays (hidden files) or passes for whole."""
        for w, hidden, _final in self.writers.values():
            w.close()
            hidden.unlink(missing_ok=True)
        self.writers = {}


def generate_double11(
    config: Double11Config,
    out: str | Path,
    force: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> GenerateResult:
    """Write the night described by `config` under `out`; progress in seconds done."""
    _check(config)
    out = Path(out)
    for table in metrics_log.SCHEMAS:
        if (out / table).exists():
            if not force:
                raise ReportError(f"{out / table} already exists (use --force to replace it)")
            shutil.rmtree(out / table)
    night = plan_night(config)
    t0 = time.perf_counter()
    files = _DayFiles(out)
    state = _State.initial(night)
    chunk_s = max(1, ROWS_PER_CHUNK // (config.brokers * len(config.ops)))
    totals = np.zeros(3, dtype=np.int64)
    first, index = 0, 0
    start_epoch = int(config.start.timestamp())
    pending: list[pa.Table] = []  # latency rows of a minute not yet complete
    try:
        while first < config.seconds:
            day = _utc_day(start_epoch + first)
            next_midnight = ((start_epoch + first) // 86400 + 1) * 86400
            n = min(chunk_s, config.seconds - first, next_midnight - (start_epoch + first))
            latency, stats, entries = _chunk(night, state, first, n, rng_for(config.seed, 3, index))
            files.writer(metrics_log.LATENCY_TABLE, day).write_table(latency.sort_by(LATENCY_ORDER))
            files.writer(metrics_log.BROKER_STATS_TABLE, day).write_table(stats)
            end = start_epoch + first + n
            last = first + n >= config.seconds or end == next_midnight
            done, pending = _complete_minutes([*pending, latency], None if last else end)
            if done.num_rows:
                files.writer(metrics_log.LATENCY_1M_TABLE, day).write_table(rollup_table(done))
            totals += (latency.num_rows, stats.num_rows, entries)
            first += n
            index += 1
            if on_progress:
                on_progress(first, config.seconds)
    except BaseException:  # Ctrl-C, SIGTERM (the command turns it into the same), errors
        files.abort()
        for table in metrics_log.SCHEMAS:  # a partial night would pass for a whole one,
            shutil.rmtree(out / table, ignore_errors=True)  # and the next run refuse it
        raise
    files.close()
    return GenerateResult(
        out=str(out),
        latency_rows=int(totals[0]),
        broker_stats_rows=int(totals[1]),
        bucket_entries=int(totals[2]),
        files=len(files.files),
        bytes_written=sum(f.stat().st_size for f in files.files),
        seconds=round(time.perf_counter() - t0, 3),
    )


def _check(config: Double11Config) -> None:
    if config.brokers < 1:
        raise ReportError(f"--brokers must be at least 1, got {config.brokers}")
    if config.seconds < 1:
        raise ReportError(f"--hours must cover at least one second, got {config.hours}")
    unknown = [op for op in config.ops if op not in OP_SHAPES]
    if unknown or not config.ops:
        raise ReportError(
            f"unknown op {unknown[0] if unknown else '(none)'}; known: {', '.join(OP_SHAPES)}"
        )
    if len(set(config.ops)) != len(config.ops):
        raise ReportError(f"--ops lists an op twice: {','.join(config.ops)}")


def _complete_minutes(tables: list[pa.Table], end: int | None) -> tuple[pa.Table, list[pa.Table]]:
    """(rows of the minutes complete at epoch second ``end``, the rest); all when None.

    Rows are in time order, so the cut is one search on ``ts``.
    """
    rows = pa.concat_tables(tables)
    if end is None:
        return rows, []
    cut_us = (end - end % metrics_log.ROLLUP_S) * 1_000_000
    ts = rows.column("ts").cast(pa.int64()).to_numpy()
    at = int(np.searchsorted(ts, cut_us, side="left"))
    return rows.slice(0, at), ([rows.slice(at)] if at < rows.num_rows else [])


def _utc_day(epoch_s: int) -> date:
    return date(1970, 1, 1) + timedelta(days=epoch_s // 86400)


@dataclass
class _State:
    """What carries from one chunk to the next: offsets, disk use, consumer lag."""

    commit_offset: np.ndarray
    disk_used: np.ndarray
    lag: np.ndarray

    @classmethod
    def initial(cls, night: Night) -> _State:
        rng = rng_for(night.config.seed, 4)
        b = night.config.brokers
        return cls(
            commit_offset=rng.integers(10**11, 5 * 10**11, b),
            disk_used=(rng.uniform(0.3, 0.5, b) * DISK_TOTAL_BYTES).astype(np.int64),
            lag=rng.integers(0, 5000, b).astype(float),
        )


def _chunk(night: Night, state: _State, first: int, n: int, rng: np.random.Generator):
    cfg = night.config
    b = cfg.brokers
    seconds = np.arange(first, first + n, dtype=float)
    rate = send_rate(night, seconds)
    sent = rng.poisson(rate * rng.lognormal(0.0, 0.05, rate.shape)).astype(float)
    capacity = cfg.base_rate * cfg.consumer_capacity * night.broker_weight
    pulled = np.empty_like(sent)
    lag = lag_before = state.lag
    for t in range(n):  # consumers drain what they can: sequential in time only
        pulled[t] = np.minimum(sent[t] + lag, capacity)
        lag = lag + sent[t] - pulled[t]
    state.lag = lag
    lag_rows = lag_before + np.cumsum(sent - pulled, axis=0)
    load = np.clip(rate / (cfg.base_rate * night.broker_weight * 16.0), 0.0, 1.0)
    spike_max, spike_share = spike_grid(night, first, n)

    per_op = {name: [] for name in ("calls", "msgs", "median", "sigma", "spike", "share", "reach")}
    for op in cfg.ops:
        shape = OP_SHAPES[op]
        msgs = pulled if op in ("pull", "ack") else sent
        if op == "flush":
            calls = rng.poisson(np.full((n, b), FLUSHES_PER_S))
        elif op == "send":
            calls = sent
        else:
            calls = rng.poisson(msgs * shape.calls_per_msg)
        per_op["calls"].append(calls)
        per_op["msgs"].append(msgs)
        per_op["median"].append(body_median(night, op, seconds, load))
        per_op["sigma"].append(np.broadcast_to(shape.sigma * night.sigma_factor, (n, b)))
        per_op["reach"].append(np.broadcast_to(night.tail_reach, (n, b)))
        per_op["spike"].append(spike_max)
        per_op["share"].append(spike_share * shape.stall_share)
    # Rows ordered (second, broker, op): stack ops last, then flatten.
    flat = {k: np.stack(v, axis=-1).ravel() for k, v in per_op.items()}
    loads = np.repeat(load.ravel(), len(cfg.ops))
    weights = np.repeat(np.tile(night.tail_weight, n), len(cfg.ops))
    hist = synthesize(
        rng,
        flat["calls"],
        flat["median"],
        flat["sigma"],
        tail_share(loads) * weights,
        flat["spike"],
        flat["share"],
        tail_factor=flat["reach"],
    )
    msg_bytes = np.repeat(np.tile(night.msg_bytes, n), len(cfg.ops))
    ts_us = (int(cfg.start.timestamp()) + first + np.arange(n, dtype=np.int64)) * 1_000_000
    names = np.array(cfg.broker_names(), dtype=object)
    rows = n * b * len(cfg.ops)
    latency = pa.table(
        {
            "ts": pa.array(np.repeat(ts_us, b * len(cfg.ops)), metrics_log.TS_TYPE),
            "cluster": pa.array(np.full(rows, cfg.cluster, dtype=object), pa.string()),
            "broker": pa.array(np.tile(np.repeat(names, len(cfg.ops)), n), pa.string()),
            "op": pa.array(np.tile(np.array(cfg.ops, dtype=object), n * b), pa.string()),
            "count": hist.count,
            "sum_us": hist.sum_us,
            "min_us": hist.min_us,
            "max_us": hist.max_us,
            "buckets": pa.MapArray.from_arrays(
                pa.array(hist.offsets), pa.array(hist.keys), pa.array(hist.counts)
            ),
            "msgs": flat["msgs"].astype(np.int64),
            "bytes": (flat["msgs"] * msg_bytes).astype(np.int64),
        },
        schema=metrics_log.LATENCY_SCHEMA,
    )
    written = sent * night.msg_bytes[None, :]
    offsets = state.commit_offset + np.cumsum(written, axis=0).astype(np.int64)
    used = state.disk_used + np.cumsum(written, axis=0).astype(np.int64)
    state.commit_offset, state.disk_used = offsets[-1], used[-1]
    stats = pa.table(
        {
            "ts": pa.array(np.repeat(ts_us, b), metrics_log.TS_TYPE),
            "cluster": pa.array(np.full(n * b, cfg.cluster, dtype=object), pa.string()),
            "broker": pa.array(np.tile(names, n), pa.string()),
            "disk_used_bytes": np.minimum(used, DISK_TOTAL_BYTES).ravel(),
            "disk_total_bytes": np.full(n * b, DISK_TOTAL_BYTES, dtype=np.int64),
            "msgs_in_per_s": sent.ravel(),
            "msgs_out_per_s": pulled.ravel(),
            "commit_offset": offsets.ravel(),
            "consumer_lag": np.maximum(lag_rows, 0).round().astype(np.int64).ravel(),
        },
        schema=metrics_log.BROKER_STATS_SCHEMA,
    )
    return latency, stats, len(hist.keys)
