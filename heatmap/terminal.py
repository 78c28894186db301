"""Terminal heatmap: a Rich renderable drawn with half-block cells.

Each character cell shows two latency rows: the upper half block's foreground
is the upper row, its background the lower one, so a 20-line panel shows 40
buckets. Colour is log-scaled count (a single stalled request must be visible
next to a million fast ones); empty cells keep the terminal's background.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import numpy as np
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from heatmap.matrix import HeatmapMatrix, format_seconds
from heatmap.sla import SLA_MAX_S

# Dark blue -> teal -> yellow -> red: readable on dark and light terminals.
_STOPS = ((0x1E, 0x3A, 0x8A), (0x0E, 0x9F, 0x9F), (0xF2, 0xD0, 0x24), (0xE0, 0x3A, 0x1E))
PALETTE_SIZE = 12


def _palette(n: int = PALETTE_SIZE) -> list[str]:
    colours = []
    for k in range(n):
        pos = k / (n - 1) * (len(_STOPS) - 1)
        i = min(int(pos), len(_STOPS) - 2)
        f = pos - i
        rgb = [round(a + (b - a) * f) for a, b in zip(_STOPS[i], _STOPS[i + 1], strict=True)]
        colours.append("#{:02x}{:02x}{:02x}".format(*rgb))
    return colours


PALETTE = _palette()


def colour_levels(counts: np.ndarray, vmax: int | None = None) -> np.ndarray:
    """Palette index per cell (-1 = empty), log-scaled to the largest count."""
    top = int(vmax if vmax is not None else (counts.max() if counts.size else 0))
    levels = np.full(counts.shape, -1, dtype=np.int64)
    if top <= 0:
        return levels
    nz = counts > 0
    scaled = np.log1p(counts[nz]) / math.log1p(top)
    levels[nz] = np.clip(np.ceil(scaled * (PALETTE_SIZE - 1)), 0, PALETTE_SIZE - 1)
    return levels


def _time_label(t: Any) -> str:
    if isinstance(t, datetime):
        return t.strftime("%H:%M:%S")
    if isinstance(t, int | float):
        return datetime.fromtimestamp(t, tz=UTC).strftime("%H:%M:%S")
    return str(t)


class TerminalHeatmap:
    """Rich renderable for a :class:`HeatmapMatrix` (y labels, x labels, legend)."""

    def __init__(self, matrix: HeatmapMatrix, title: str = "", legend: bool = True) -> None:
        self.matrix = matrix
        self.title = title
        self.legend = legend

    def _label_width(self) -> int:
        labels = [self.matrix.row_label(r) for r in range(self.matrix.n_rows)]
        return max((len(s) for s in labels), default=4) + 1

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        m = self.matrix
        if self.title:
            yield Text(self.title, style="bold")
        if m.n_rows == 0 or m.n_cols == 0 or not m.counts.any():
            yield Text("no data", style="dim")
            return
        lw = self._label_width()
        m = m.compress_columns(max(1, options.max_width - lw - 1))
        levels = colour_levels(m.counts)
        rows = m.n_rows + (m.n_rows % 2)  # pad to an even count: two rows per line
        levels = np.vstack([levels, np.full((rows - m.n_rows, m.n_cols), -1)])
        for top in range(rows - 1, 0, -2):  # highest latency first
            upper, lower = top, top - 1
            label_row = upper if upper < m.n_rows else lower
            label = m.row_label(label_row)
            slow = m.row_bounds(label_row)[0] >= SLA_MAX_S
            segments = [Segment(label.rjust(lw - 1) + "│", Style(color="red" if slow else None))]
            for col in range(m.n_cols):
                fg, bg = levels[upper, col], levels[lower, col]
                if fg < 0 and bg < 0:
                    segments.append(Segment(" "))
                    continue
                if fg >= 0:
                    style = Style(color=PALETTE[fg], bgcolor=PALETTE[bg] if bg >= 0 else None)
                    segments.append(Segment("▀", style))
                else:  # only the lower row has counts
                    segments.append(Segment("▄", Style(color=PALETTE[bg])))
            yield from segments
            yield Segment.line()
        first, last = _time_label(m.times[0]), _time_label(m.times[-1])
        axis = " " * lw + first
        gap = lw + m.n_cols - len(axis) - len(last)
        yield Text(axis + " " * max(1, gap) + last, style="dim")
        if self.legend:
            yield self._legend(int(m.counts.max()))

    def _legend(self, vmax: int) -> Text:
        text = Text("count ", style="dim")
        for k in (0, PALETTE_SIZE // 3, 2 * PALETTE_SIZE // 3, PALETTE_SIZE - 1):
            # smallest count that reaches palette level k
            value = max(1, math.ceil(math.expm1(k / (PALETTE_SIZE - 1) * math.log1p(vmax))))
            text.append("██", style=PALETTE[k])
            text.append(f" {value:,}  ")
        text.append(f"(log scale, max {vmax:,}; red labels ≥ {format_seconds(SLA_MAX_S)})",
                    style="dim")
        return text


def render_text(matrix: HeatmapMatrix, width: int = 100, title: str = "") -> str:
    """Render to a plain string (ANSI colours included) for logs and the CLI."""
    console = Console(width=width, record=False, force_terminal=True, color_system="truecolor")
    with console.capture() as capture:
        console.print(TerminalHeatmap(matrix, title=title))
    return capture.get()
