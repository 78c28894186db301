"""The send-latency heatmap of the last 5 minutes (the Double-11 talk's picture),
fitted to the panel: the finest latency rows that fit its height, so the
broker screen never grows past the terminal."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.text import Text

from heatmap import HeatmapMatrix, TerminalHeatmap, bucket_upper, build_heatmap
from heatmap.sla import HISTORY_S


class FittedHeatmap:
    """The finest latency rows that fit the height Textual gives: schema 2, 1
    or 0, where a schema may lose its fastest quarter of rows to one underflow
    row (the slow end is what an SLA breach shows); at worst schema 0 keeps
    the slowest rows that fit. Without a height: schema 2, whole."""

    KEEP = 0.75  # share of a schema's rows worth keeping before trying a coarser one

    def __init__(self, pairs, title: str) -> None:
        self.pairs, self.title = pairs, title
        self._matrices: dict[int, HeatmapMatrix] = {}

    def matrix(self, schema: int) -> HeatmapMatrix:
        if schema not in self._matrices:
            self._matrices[schema] = build_heatmap(self.pairs, schema=schema)
        return self._matrices[schema]

    def heatmap(self, schema: int, rows: int | None = None) -> TerminalHeatmap:
        """The heatmap at `schema`, its fastest rows merged so `rows` remain."""
        matrix = self.matrix(schema)
        if rows is not None and rows < matrix.n_rows:
            lo_s = bucket_upper(matrix.hi_index - max(1, rows - 2), schema)
            matrix = build_heatmap(self.pairs, schema=schema, lo_s=lo_s)
        return TerminalHeatmap(matrix, title=self.title, legend=rows is None or rows > 4)

    def choose(self, console: Console, options: ConsoleOptions) -> TerminalHeatmap:
        height = options.height
        if height is None:
            return self.heatmap(2)
        # drawing costs more than counting: the coarsest drawing tells the lines
        # besides the rows (title, time axis, legend, which may wrap)
        coarse = console.render_lines(self.heatmap(0), options.update(height=None), pad=False)
        extra = len(coarse) - (self.matrix(0).n_rows + 1) // 2
        rows = 2 * (height - extra)  # two latency rows a line
        for schema in (2, 1, 0):
            full = self.matrix(schema).n_rows
            if full <= rows:
                return self.heatmap(schema)
            if rows >= self.KEEP * full or schema == 0:
                return self.heatmap(schema, max(2, rows))
        raise AssertionError("unreachable: schema 0 always returns")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self.choose(console, options),
                                     options.update(height=None), pad=False)
        for line in lines[:options.height]:
            yield from line
            yield Segment.line()


def render(state, focus=None):
    broker = state.broker(focus) if focus else None
    if broker is None:
        return Text("pick a broker (Enter on the cluster table)", style="dim")
    pairs = list(broker.history)  # (second, LatencyHistogram), decoded by the source
    if not pairs:
        return Text(f"{broker.name}: no send history yet", style="dim")
    span = pairs[-1][0] - pairs[0][0] + 1
    # the broker keeps HISTORY_S seconds; until the console has seen that many the
    # picture is shorter, and says so (the README promised 5 minutes; it read 180 s)
    filling = f" (fills to {HISTORY_S // 60} min)" if span < HISTORY_S else ""
    return FittedHeatmap(pairs, f"{broker.name} send latency, last {span} s{filling}")
