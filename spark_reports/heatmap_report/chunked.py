"""The heatmap's finish a slice of brokers at a time, so the driver's memory follows
the page, not the cluster.

The pass's aggregate (windows x brokers x ops x buckets) is ~100 bytes a row on
the driver: a 100-broker day at 5-minute windows is 2.6 M rows, a 1,000-broker
day ten times that. Brokers are independent until the cluster roll-up, so the
job brings the aggregate back in slices of brokers (`Finish.add`): each slice's
per-broker outputs (heatmap and percentiles rows) are written and dropped; what
the page needs is kept: each broker's ranking row, the first spike windows in
time, the cells of the brokers that may be the worst few; and the cluster's
histograms are added up across slices (bounded by windows x ops x buckets).
`Finish.done` then gives the cluster's rows and the report's figures.

Every figure comes from merge's functions on the same groups, so a report made
in one slice and in many is the same, row for row and float for float (tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from heatmap.layout import ZERO_INDEX
from spark_reports.heatmap_report import merge
from spark_reports.heatmap_report.merge import _NO_MAX, _NO_MIN, ALL_BROKERS, Groups, Merged

_OPS = 256  # op codes per window in a cluster key (the schema knows a handful of ops)
SLICE_ROWS = 3_000_000  # aggregate rows the driver holds at once (~100 bytes each, twice)
BUCKETS_PER_GROUP = 40  # buckets in use per (window, broker, op): measured on generated nights


def slices_for(brokers: int, windows: int, ops: int, slice_rows: int | None = None) -> int:
    """How many slices of brokers keep each near ``slice_rows`` aggregate rows."""
    rows = max(1, brokers) * max(1, windows) * max(1, ops) * BUCKETS_PER_GROUP
    return max(1, min(max(1, brokers), -(-rows // (slice_rows or SLICE_ROWS))))


@dataclass
class Finish:
    window_s: int
    op: str  # the op the report draws
    draw_s: int
    worst_n: int
    spikes_kept: int  # spike windows kept, first in time (the page lists these)
    ops: dict[str, int] = field(default_factory=dict)  # op name -> code in cluster keys
    cluster: Groups | None = None  # key = epoch window index * _OPS + op code
    rankings: list[pd.DataFrame] = field(default_factory=list)
    spikes: pd.DataFrame | None = None
    cells: dict[str, pd.DataFrame] = field(default_factory=dict)  # candidates' cells
    candidates: pd.DataFrame | None = None  # their ranking rows

    def add(self, m: Merged) -> tuple[pa.Table, pa.Table]:
        """Take one slice's aggregate; its brokers' (heatmap, percentiles) rows to write."""
        pcts = merge.percentiles(m.groups)
        data = merge.report_data(m, pcts, self.op, self.draw_s, self.worst_n)
        ranking = data["ranking"]
        self.rankings.append(ranking[ranking["broker"] != ALL_BROKERS])
        self._keep_spikes(data["spikes"])
        self._keep_cells(data["cells"], ranking, data["worst_brokers"])
        self._add_cluster(m)
        heat, rows = merge.heatmap_table(m), merge.percentiles_table(m, pcts)
        return (heat.filter(pc.not_equal(heat["broker"], ALL_BROKERS)),
                rows.filter(pc.not_equal(rows["broker"], ALL_BROKERS)))  # fmt: skip

    def _keep_spikes(self, spikes: pd.DataFrame) -> None:
        both = spikes if self.spikes is None else pd.concat([self.spikes, spikes])
        order = both.sort_values(["t", "max"], ascending=[True, False], kind="stable")
        self.spikes = order.head(self.spikes_kept)

    def _keep_cells(self, cells: pd.DataFrame, ranking: pd.DataFrame, worst: list[str]) -> None:
        """Cells of the brokers that can still be among the worst few overall."""
        for name in worst:
            self.cells[name] = cells[cells["broker"] == name]
        rows = ranking[ranking["broker"].isin(worst)]
        both = rows if self.candidates is None else pd.concat([self.candidates, rows])
        self.candidates = both
        keep = set(merge.worst_brokers(both, self.worst_n))
        self.cells = {b: c for b, c in self.cells.items() if b in keep}
        self.candidates = both[both["broker"].isin(keep)]

    def _add_cluster(self, m: Merged) -> None:
        """Add the slice's roll-up (its "ALL" groups) to the cluster's."""
        g = m.groups
        w, b, o = m.parts(g.key)
        codes = np.array([self.ops.setdefault(name, len(self.ops)) for name in m.ops], np.int64)
        mine = b == len(m.brokers) - 1
        key = (m.windows[w] // self.window_s) * _OPS + codes[o]
        e = np.flatnonzero(mine[g.group])
        parts = [_as_rows(key[mine], g.count[mine], g.sum_us[mine], g.min_us[mine],
                          g.max_us[mine], key[g.group[e]], g.bucket[e], g.n[e])]  # fmt: skip
        if self.cluster is not None:
            c = self.cluster
            parts.append(_as_rows(c.key, c.count, c.sum_us, c.min_us, c.max_us,
                                  c.key[c.group], c.bucket, c.n))  # fmt: skip
        self.cluster = merge.reduce_groups(*(np.concatenate(x) for x in zip(*parts, strict=True)))

    def done(self) -> tuple[Merged, dict, dict]:
        """(the cluster-only Merged, its percentiles, the report's figures)."""
        c = self.cluster if self.cluster is not None else merge.reduce_groups(*_as_rows(*[np.zeros(0, np.int64)] * 8))
        names = np.array(sorted(self.ops, key=self.ops.get), dtype=object)
        win, op = c.key // _OPS, c.key % _OPS
        first = int(win.min()) if len(win) else 0
        windows = (first + np.arange(int(win.max()) - first + 1 if len(win) else 0)) * self.window_s
        groups = Groups((win - first) * max(1, len(names)) + op, c.count, c.sum_us, c.min_us,
                        c.max_us, c.group, c.bucket, c.n)  # fmt: skip
        cluster = Merged(self.window_s, np.array([ALL_BROKERS], dtype=object), names,
                         windows.astype(np.int64), groups, {}, {})  # fmt: skip
        pcts = merge.percentiles(groups)
        data = merge.report_data(cluster, pcts, self.op, self.draw_s, self.worst_n)
        ranking = pd.concat([*self.rankings, data["ranking"]], ignore_index=True)
        facts = merge.summary(ranking, self.worst_n)
        cells = [data["cells"], *(self.cells[b] for b in facts["worst_brokers"] if b in self.cells)]
        spikes = self.spikes if self.spikes is not None else data["spikes"]
        return cluster, pcts, {
            **data, **facts, "cells": pd.concat(cells, ignore_index=True),
            "spikes": spikes.reset_index(drop=True),
        }  # fmt: skip


def _as_rows(key, count, sum_us, min_us, max_us, entry_key, bucket, n) -> tuple:
    """Groups' stats and entries as reduce_groups' rows (stats rows carry no entry)."""
    none = np.zeros(len(entry_key), np.int64)
    return (np.concatenate([key, entry_key]), np.concatenate([count, none]),
            np.concatenate([sum_us, none]), np.concatenate([min_us, none + _NO_MIN]),
            np.concatenate([max_us, none + _NO_MAX]),
            np.concatenate([np.full(len(key), ZERO_INDEX - 1, np.int64), bucket.astype(np.int64)]),
            np.concatenate([np.zeros(len(key), np.int64), n]))  # fmt: skip
