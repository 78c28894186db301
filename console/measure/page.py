"""`capacity-measure.html`: the measured grid beside MetaQ 2.0's published table (raw
and per core) and each cell's throughput against concurrency with its USL curve.
One self-contained file (spark_reports.report_kit's parts: images inline)."""

from __future__ import annotations

import html

from capacity.metaq2 import METAQ_CORES
from capacity.usl import usl_throughput
from spark_reports.report_kit import Num, figure, figure_png, img, page, table

CSS = "body{font-family:sans-serif;margin:16px 24px;max-width:1200px}.muted{color:#666}"


def _n(v, fmt: str = ",.0f") -> Num | None:
    return None if v is None else Num(format(v, fmt))


def render(doc: dict) -> str:
    cores = doc["host"]["cores"]
    cells = doc["cells"]
    parts = [
        "<h1>Capacity measured</h1>",
        f"<p class=muted>{cores} cores, {doc['host']['memory_gib']} GiB; each step "
        f"{doc['step_s']:g} s of sending; the knee: the most messages a second with the send "
        f"p99 within {doc['sla_p99_ms']:g} ms and no sends failing. MetaQ 2.0: the Taobao "
        f"talk (Zhang Lewei, 2013), {METAQ_CORES} cores. {doc['seconds']:,.0f} s in all.</p>",
    ]
    if not cells:
        parts.append("<p>No cell measured yet.</p>")
    else:
        parts.append(table(cells, [
            ("cell", lambda c: c["label"]),
            ("knee N", lambda c: (c["knee"] or {}).get("concurrency")),
            ("send TPS", lambda c: _n((c["knee"] or {}).get("send_tps"))),
            ("stored TPS", lambda c: _n((c["knee"] or {}).get("stored_tps"))),
            ("sub TPS", lambda c: _n((c["knee"] or {}).get("sub_tps"))),
            ("avg ms", lambda c: _n((c["knee"] or {}).get("avg_ms"), ".2f")),
            ("p99 ms", lambda c: _n((c["knee"] or {}).get("p99_ms"), ".2f")),
            ("max ms", lambda c: _n((c["knee"] or {}).get("max_ms"), ".1f")),
            ("load", lambda c: _n((c["knee"] or {}).get("load"), ".1f")),
            ("iowait %", lambda c: _n((c["knee"] or {}).get("iowait_pct"), ".2f")),
            ("in MB/s", lambda c: _n((c["knee"] or {}).get("net_in_mb"), ".1f")),
            ("out MB/s", lambda c: _n((c["knee"] or {}).get("net_out_mb"), ".1f")),
            ("CPU µs/msg", lambda c: _n((c["knee"] or {}).get("cpu_us_per_msg"), ".1f")),
            ("RSS MiB", lambda c: _n((c["knee"] or {}).get("peak_rss_mib"))),
            ("per core", lambda c: _n(c.get("per_core_tps"))),
            ("MetaQ 2.0 TPS", lambda c: _n((c.get("metaq2") or {}).get("send_tps"))),
            ("MetaQ ms", lambda c: _n((c.get("metaq2") or {}).get("send_ms"), ".2f")),
            ("MetaQ per core", lambda c: _n((c.get("metaq2") or {}).get("per_core_tps"))),
            ("per core vs MetaQ", lambda c: _n(c.get("per_core_vs_metaq2"), ".2f")),
            ("stopped", lambda c: c["stopped"]),
        ]))
        parts.append(_curves(cells))
    if doc.get("backlog"):
        parts.append(_backlog(doc["backlog"]))
    for s in doc.get("skipped", []):
        parts.append(f"<p class=muted>{html.escape(s['label'])}: not measured, "
                     f"{html.escape(s['why'])}.</p>")
    return page("floodgate capacity measure", CSS, parts)


def _backlog(b: dict) -> str:
    """`capacity backlog`'s runs beside the talk's two rows (CFQ 65 ms, deadline 5.3 ms)."""
    head = (f"<h2>Backlog: consumers reading from disk, {b['size']}-byte sync sends</h2>"
            f"<p class=muted>{b['fill']['messages']:,} messages written first on {b['device']} "
            f"({b['fill']['mb_s']:g} MB/s); page cache dropped before each scheduler. The "
            "Taobao talk: 65 ms and 1 k sends/s under CFQ, 5.3 ms and 8 k/s under deadline. "
            f"Best here: {html.escape(str(b['best']))}.</p>")
    return head + table(b["runs"], [
        ("scheduler", lambda r: r["scheduler"]),
        ("send p99 ms", lambda r: _n(r["send_p99_ms"], ".1f")),
        ("send max ms", lambda r: _n(r["send_max_ms"], ".1f")),
        ("sends/s", lambda r: _n(r["send_tps"])),
        ("consumers MB/s", lambda r: _n(r["consume_mb_s"], ".0f")),
        ("from disk MB/s", lambda r: _n(r["disk_read_mb_s"], ".0f")),
        ("iowait %", lambda r: _n(r["iowait_pct"], ".1f")),
    ])


def _curves(cells: list[dict]) -> str:
    """Send TPS against concurrency per cell, the USL fit drawn through it."""
    flushes = sorted({c["flush"] for c in cells})
    with figure(11, 4 * len(flushes), rows=len(flushes)) as (fig, axes):
        axes = axes if len(flushes) > 1 else [axes]
        for ax, flush in zip(axes, flushes, strict=True):
            for c in (c for c in cells if c["flush"] == flush and c["steps"]):
                ns = [s["concurrency"] for s in c["steps"]]
                xs = [s["send_tps"] for s in c["steps"]]
                line, = ax.plot(ns, xs, "o", label=c["label"])
                fit = c.get("usl")
                if fit:
                    grid = [1 + i * (max(ns) * 1.5 - 1) / 100 for i in range(101)]
                    ax.plot(grid, usl_throughput(grid, fit["sigma"], fit["kappa"],
                                                 fit["lambda"]), "-", color=line.get_color())
            ax.set_xscale("log", base=2)
            ax.set_ylabel("send msgs/s")
            ax.set_title(f"flush {flush}: points measured, lines the USL fit")
            ax.legend(fontsize=8)
        axes[-1].set_xlabel("producer requests in flight")
        png = figure_png(fig, bbox_inches="tight")
    return img(png, "send throughput against concurrency per cell, with USL fits")
