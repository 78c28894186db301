"""The capacity grid a measurement walks, and MetaQ 2.0's published figures for it.

The Taobao talk (Zhang Lewei, "淘宝消息中间件技术演变", 2013) publishes what a capacity
assessment of MetaQ 2.0 looked like on one 16-core broker: per flush mode, queue count
and message size, the send latency, send and subscribe TPS, load, iowait and network
(capacity/data/metaq2_2013.csv). Its grid is the default of `floodgate capacity
measure`; its figures are what a cell of ours is set beside, raw and per core.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources

from capacity.errors import CapacityError

METAQ_CORES = 16  # the talk's host: Xeon L5630, 16 cores
FLUSH_MODES = ("async", "sync")


@dataclass(frozen=True, order=True)
class Cell:
    """One point of the grid: flush mode, queues of the topic, message body bytes."""

    flush: str
    queues: int
    size: int

    def __post_init__(self) -> None:
        if self.flush not in FLUSH_MODES:
            raise CapacityError(f"flush mode {self.flush!r}: want async or sync")
        if not (1 <= self.queues <= 65_536 and 0 <= self.size <= 4 << 20):
            raise CapacityError(f"a cell of {self.queues} queues and {self.size}-byte "
                                "messages: want 1..65536 queues and 0..4 MiB")

    @property
    def label(self) -> str:
        return f"{self.flush} {size_text(self.size)} x {self.queues}"


@dataclass(frozen=True)
class Published:
    """A row of the talk's table."""

    scenario: str  # grid | more-subscribers | backlog
    cell: Cell
    send_ms: float
    send_tps: float
    sub_tps: float
    load: float
    iowait_pct: float
    net_in_mb: float
    net_out_mb: float
    scheduler: str

    @property
    def send_tps_per_core(self) -> float:
        return self.send_tps / METAQ_CORES


def size_text(size: int) -> str:
    """128 -> "128 B", 2048 -> "2 KiB"."""
    return f"{size // 1024} KiB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


def published() -> list[Published]:
    """Every row of the talk's table, in its order."""
    path = resources.files("capacity.data") / "metaq2_2013.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    return [Published(r["scenario"], Cell(r["flush"], int(r["queues"]), int(r["size"])),
                      float(r["send_ms"]), float(r["send_tps"]), float(r["sub_tps"]),
                      float(r["load"]), float(r["iowait_pct"]), float(r["net_in_mb"]),
                      float(r["net_out_mb"]), r["scheduler"]) for r in rows]


def talk_grid() -> list[Cell]:
    """The talk's ten cells: async and sync, four sizes on 1,024 queues and 512 B on
    10,240."""
    return [row.cell for row in published() if row.scenario == "grid"]


def published_for(cell: Cell) -> Published | None:
    """The talk's grid row of `cell`, or None where it published none."""
    return next((r for r in published() if r.scenario == "grid" and r.cell == cell), None)


def grid(flush: list[str] | None = None, sizes: list[int] | None = None,
         queues: list[int] | None = None) -> list[Cell]:
    """The talk's cells that match what is given (each left out matches all), or, where
    none does (a size or queue count the talk did not measure), every combination of
    what is given with the talk's values for what is not."""
    cells = talk_grid()
    picked = [c for c in cells if (flush is None or c.flush in flush)
              and (sizes is None or c.size in sizes) and (queues is None or c.queues in queues)]
    if picked:
        return picked
    return [Cell(f, q, s)
            for f in flush or FLUSH_MODES
            for q in queues or sorted({c.queues for c in cells})
            for s in sizes or sorted({c.size for c in cells})]
