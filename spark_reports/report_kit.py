"""What both HTML reports are made of: a matplotlib figure, its PNG bytes, the
bytes as an embedded image, an escaped table, and the page around them.

A report is one self-contained file with no external assets: images as data:
URIs; interactive charts as plotly.js inlined from the plotly package (installed
with floodgate) plus the figures' data in an inert JSON script element. The page's CSS is `BASE_CSS` (tables, images) plus the
report's own theme. matplotlib is imported when a figure is made, on the Agg
backend, so rendering needs no display.
"""

from __future__ import annotations

import base64
import functools
import html
import io
import json
import math
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from typing import Any

BASE_CSS = """
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 12px;text-align:right}
td:first-child,th:first-child,td.t{text-align:left}img{max-width:100%}
"""


@contextmanager
def figure(width: float, height: float, rows: int = 1, dpi: float | None = None):
    """A new matplotlib (figure, axes), closed on leaving the block whatever happens;
    ``rows`` > 1 stacks axes on a shared x."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(rows, 1, figsize=(width, height), sharex=rows > 1, dpi=dpi)
    try:
        yield fig, axes
    finally:
        plt.close(fig)


def figure_png(fig, **savefig: Any) -> bytes:
    """The figure as PNG bytes (``savefig`` options passed on)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", **savefig)
    return buf.getvalue()


def img(png: bytes, alt: str) -> str:
    """An <img> carrying ``png`` inline as a data: URI."""
    data = base64.b64encode(png).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


class Num(str):
    """Text of a number (already formatted): its cell aligns right like a number's."""


def _cell(value: Any) -> str:
    if isinstance(value, Num) or (isinstance(value, int | float) and not isinstance(value, bool)):
        text = f"{value:,}" if isinstance(value, int) and not isinstance(value, Num) else value
        return f"<td>{html.escape(str(text))}</td>"
    return f"<td class=t>{html.escape('' if value is None else str(value))}</td>"


def table(rows: Iterable[Any], columns: Sequence[tuple[str, Callable[[Any], Any]]]) -> str:
    """An HTML table, one row per item of ``rows``; ``columns`` are (header, cell).

    ``cell(row)`` gives the cell: an int is written with thousands separators,
    numbers and `Num` align right, text left, None is an empty cell. All escaped.
    """
    head = "".join(f"<th>{html.escape(name)}</th>" for name, _ in columns)
    body = "".join(
        "<tr>" + "".join(_cell(cell(row)) for _, cell in columns) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def page(title: str, css: str, parts: Iterable[str]) -> str:
    """The whole document: ``parts`` in order under a head with ``css``."""
    head = (
        f"<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{html.escape(title)}</title><style>{BASE_CSS}{css}</style></head><body>"
    )
    return "\n".join([head, *parts, "</body></html>"])


@functools.cache
def plotly_js() -> str:
    """plotly.js as shipped inside the plotly package, to inline in a <script>."""
    from plotly.offline import get_plotlyjs

    js = get_plotlyjs()
    if "</script" in js.lower():  # pragma: no cover - would end our <script> early
        raise RuntimeError("plotly.js contains </script>: cannot inline it")
    return js


def json_block(element_id: str, data) -> str:
    """``data`` as an inert JSON script element ("</" escaped so it cannot close it)."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def ms_text(ms: float) -> str:
    """A latency tick's label: 0.05 ms, 0.5 ms, 20 ms, 2 s."""
    return f"{ms / 1e3:g} s" if ms >= 1000 else f"{ms:g} ms"


def log_axis_ms(values: Iterable[float | None], floor: float = 0.01) -> dict:
    """A plotly log axis in milliseconds whose every tick says its value and unit
    (1-2-5 steps). Plotly's own log ticks label the steps between powers of ten
    by their first digit alone: 20 ms read "2" and 0.5 ms "5"."""
    seen = [v for v in values if v is not None and v == v and v > 0]
    lo, hi = (min(seen), max(seen)) if seen else (0.1, 100.0)
    lo, hi = max(lo, floor), max(hi, lo * 10)
    vals, decade = [], 10.0 ** math.floor(math.log10(lo))
    steps = (1, 2, 5) if hi / lo <= 1e3 else (1, 5)  # at most ~12 ticks on a wide range
    while decade <= hi * 10:
        vals += [decade * k for k in steps if lo / 2 <= decade * k <= hi * 2]
        decade *= 10
    vals = [float(f"{v:.6g}") for v in vals]
    return {"type": "log", "tickvals": vals, "ticktext": [ms_text(v) for v in vals]}
