"""What an incident page is made of, read from a cluster's data dir: the events log
(broker_core.observe.events) and the brokers' metrics log (heatmap.metrics_log), over
a window of wall-clock time.

No Spark here: a night's window of one cluster is a few hundred thousand rows of
the per-second latency table, read with pyarrow in a second or two, where a Spark
session would take ten to start.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from broker_core.observe.events import log_files, scan
from console.errors import CommandFailed

WINDOW_S = 10  # the SLA's window (the console's, the demo's health goals)
KILL_TO_FAILOVER_S = 60.0  # a kill this long before a failover of its group caused it


@dataclass
class BrokerWindows:
    """One broker's sends: each WINDOW_S window's p99 and max, in seconds."""
    name: str
    starts: list[float] = field(default_factory=list)
    p99: list[float | None] = field(default_factory=list)
    max: list[float | None] = field(default_factory=list)
    sends: int = 0  # send requests timed (a frame of several messages is one)
    msgs: int = 0  # the messages they carried

    @property
    def worst_p99(self) -> float | None:
        return max((v for v in self.p99 if v is not None), default=None)

    @property
    def worst_max(self) -> float | None:
        return max((v for v in self.max if v is not None), default=None)


@dataclass
class Incident:
    data: Path
    since: float
    until: float
    events: list[dict]
    brokers: list[BrokerWindows]
    columns: list[tuple[float, object]]  # (window start, all brokers' sends' histogram)
    unreadable: int = 0  # event lines cut short (a writer died mid-line)

    def of(self, *kinds: str) -> list[dict]:
        return [e for e in self.events if e.get("kind") in kinds]

    def failovers(self) -> list[dict]:
        """Each failover with what caused it when the log says (a kill of the group's old
        master shortly before: then `unavailable_s`, the kill to the promotion)."""
        out = []
        kills = [e for e in self.of("fault") if e.get("action") == "kill"]
        for f in self.of("failover"):
            old = f.get("old_master") or ""
            cause = next((k for k in reversed(kills)
                          if old and (k.get("node") == old or old in k.get("text", ""))
                          and 0 <= f["time"] - k["time"] <= KILL_TO_FAILOVER_S), None)
            out.append({**f, "cause": cause,
                        "unavailable_s": f["time"] - cause["time"] if cause else None})
        return out


def resolve_data(data: str | os.PathLike | None, cluster: str | os.PathLike | None) -> Path:
    """The data dir of a cluster (its cluster file's directory) or a demo's `--data`."""
    if (data is None) == (cluster is None):
        raise CommandFailed("give --data DIR (a demo's or a cluster's data dir) or "
                            "--cluster FILE, not both")
    where = Path(cluster).resolve().parent if cluster is not None else Path(data).resolve()
    if not where.is_dir():
        raise CommandFailed(f"{where}: no such directory")
    if not log_files(where) and not (where / "metrics").is_dir():
        raise CommandFailed(f"{where}: no events.jsonl and no metrics log here: is it a "
                            "cluster's or a demo's data dir (`floodgate demo --data DIR`)?")
    return where


def gather(data: Path, since: float | None, until: float | None) -> Incident:
    """The window [since, until] (each defaulting to the first and last thing recorded)."""
    events, unreadable = scan(data) if log_files(data) else ([], 0)
    metrics, named = _latency_rows(data / "metrics", since, until)
    times = [e["time"] for e in events] + [r[0] for r in metrics]
    if not times:
        raise CommandFailed(f"{data}: nothing recorded in that window")
    since = min(times) if since is None else since
    until = max(times) if until is None else until
    if since >= until:
        raise CommandFailed(f"--from must be before --to ({_utc(since)} is not before "
                            f"{_utc(until)})")
    events = [e for e in events if since <= e["time"] <= until]
    brokers, columns = _windows(metrics, since, until, named)
    return Incident(data, since, until, events, brokers, columns, unreadable)


def _latency_rows(root: Path, since: float | None, until: float | None
                  ) -> tuple[list[tuple], set[str]]:
    """(ts, broker, histogram, msgs) of every send second in the window; and every broker
    the log names (one killed before its log rolled has no sends in it: said, not hidden)."""
    files = sorted(glob.glob(str(root / "latency" / "date=*" / "*.parquet")))
    seen: set[str] = set()
    if not files:
        return [], seen
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from heatmap.metrics_log import histogram_from_row

    rows = []
    for f in files:
        t = pq.read_table(f, columns=["ts", "broker", "op", "count", "sum_us", "min_us",
                                      "max_us", "buckets", "msgs"])
        seen.update(t["broker"].unique().to_pylist())
        mask = pc.equal(t["op"], "send")
        if since is not None:
            mask = pc.and_(mask, pc.greater_equal(t["ts"], _ts(since)))
        if until is not None:
            mask = pc.and_(mask, pc.less_equal(t["ts"], _ts(until)))
        for r in t.filter(mask).to_pylist():
            if r["count"]:
                rows.append((r["ts"].timestamp(), r["broker"], histogram_from_row(r),
                             r["msgs"] or 0))
    return rows, seen


def _windows(rows: list[tuple], since: float, until: float, named: set[str]):
    from heatmap import LatencyHistogram

    start = since - since % WINDOW_S
    n = int((until - start) // WINDOW_S) + 1
    per: dict[str, list] = {}
    cols = [LatencyHistogram() for _ in range(n)]
    msgs: dict[str, int] = {}
    for ts, broker, h, m in rows:
        i = min(n - 1, max(0, int((ts - start) // WINDOW_S)))
        msgs[broker] = msgs.get(broker, 0) + m
        slots = per.setdefault(broker, [None] * n)
        slots[i] = h if slots[i] is None else slots[i] + h
        cols[i] = cols[i] + h
    brokers = []
    for name in sorted(set(per) | named):
        b = BrokerWindows(name, msgs=msgs.get(name, 0))
        for i, h in enumerate(per.get(name, [None] * n)):
            b.starts.append(start + i * WINDOW_S)
            b.p99.append(h.quantile(0.99) if h is not None else None)
            b.max.append(h.max if h is not None else None)
            if h is not None:
                b.sends += h.count
        brokers.append(b)
    return brokers, [(start + i * WINDOW_S, h) for i, h in enumerate(cols)]


def _ts(t: float):
    import pyarrow as pa

    return pa.scalar(datetime.fromtimestamp(t, tz=UTC), type=pa.timestamp("us", tz="UTC"))


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
