"""The post-mortem of an incident window, in the structure of a Google SRE post-mortem
(summary, impact, root causes, trigger, detection, resolution, action items, lessons
learned, timeline, supporting information), as one self-contained HTML page and as
Markdown for a ticket. What the logs know is filled in; what only the team knows is
left blank under a prompt.

The document is built once as sections of blocks, then written by either renderer,
so the two never say different things.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass

from console.demo.summary import MASTER_MAX_GOAL_S as MAX_GOAL_S  # the SLA's max
from console.demo.summary import MASTER_P99_GOAL_S as P99_GOAL_S  # the demo's health goal
from console.incident.gather import WINDOW_S, Incident
from spark_reports.report_kit import figure, figure_png, img
from spark_reports.report_kit import page as html_page


@dataclass
class Block:
    kind: str  # p | table | img | blank
    text: str = ""
    head: tuple[str, ...] = ()
    rows: tuple[tuple, ...] = ()
    png: bytes = b""


def clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def day(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(t))


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def sections(inc: Incident, charts: bool = True) -> list[tuple[str, list[Block]]]:
    faults = [e for e in inc.of("fault", "offsets") if e.get("action") != "clear"]
    fuse = inc.of("fuse")
    isolations = [e for e in fuse if e.get("event") == "isolate"]
    failovers = inc.failovers()
    alerts = [e for e in inc.of("alert") if not e.get("cleared")]
    drills = inc.of("drill")
    worst = max(inc.brokers, key=lambda b: b.worst_max or 0, default=None)
    sends = sum(b.sends for b in inc.brokers)
    over = [(b, sum(1 for v in b.max if v is not None and v > MAX_GOAL_S)) for b in inc.brokers]
    zone = time.strftime("%Z (UTC%z)", time.localtime(inc.since))
    out = []
    out.append(("Summary", [Block("p", (
        f"{day(inc.since)} {clock(inc.since)} to {clock(inc.until)} {zone}, "
        f"{(inc.until - inc.since) / 60:.1f} minutes: {len(faults)} fault(s) recorded, "
        f"{len(alerts)} alert(s) raised, {len(isolations)} fuse isolation(s), "
        f"{len(failovers)} failover(s)."
        + (f" Worst broker: {worst.name}, send max {ms(worst.worst_max)}, worst {WINDOW_S} s "
           f"p99 {ms(worst.worst_p99)}." if worst is not None and worst.worst_max else ""))),
        Block("blank", "In two sentences, for someone who was not there: what happened?")]))
    msgs = sum(b.msgs for b in inc.brokers)
    impact = [Block("p", f"{msgs:,} messages stored in {sends:,} send requests timed by the "
                         "brokers in the window."
                    if inc.brokers else "No metrics log in this window: latency unknown.")]
    blind = [b.name for b in inc.brokers if not b.sends]
    impact += [Block("p", f"No send figures in the metrics log for {', '.join(blind)}: a "
                          "slave takes no sends, and a broker killed loses the seconds it had "
                          "not yet written (up to two minutes).")] if blind else []
    impact += [Block("p", f"{b.name}: {n} window(s) of {WINDOW_S} s with a send over "
                     f"{ms(MAX_GOAL_S)}.") for b, n in over if n]
    measured = [d for d in drills if d.get("lost") is not None]
    impact.append(Block("p", "Lost and duplicated messages, as drills measured them: " + "; ".join(
        f"{clock(d['time'])} lost {d['lost']}, duplicated {d.get('duplicated', '?')}"
        + (f", failover {d['failover_s']:.2f} s" if d.get("failover_s") is not None else "")
        for d in measured) + "." if measured else
        "Lost and duplicated messages: not measured (no drill ran in this window: "
        "`floodgate drill failover` or `drill chaos` measure them)."))
    impact.append(Block("blank", "Who noticed, which services and users were affected?"))
    out.append(("Impact", impact))
    out.append(("Root causes", [
        Block("table", head=("time", "fault injected or recorded", "on"),
              rows=tuple((clock(e["time"]), e["text"], e.get("subject", "")) for e in faults))
        if faults else Block("p", "No fault was recorded in the window."),
        Block("blank", "Why did it happen? Why did that happen? (five whys)")]))
    first_fault = faults[0] if faults else None
    first_alert = next((a for a in alerts if first_fault is None or
                        a["time"] >= first_fault["time"]), None)
    detect = [Block("p", f"First alert{' after the first fault' if first_fault else ''} "
                         f"{clock(first_alert['time'])}: {first_alert['text']}"
                    if first_alert else "No alert was raised.")]
    if first_fault and isolations:
        iso = next((e for e in isolations if e["time"] >= first_fault["time"]), None)
        if iso:
            detect.append(Block("p", f"The fuse isolated {iso['subject']} "
                                     f"{iso['time'] - first_fault['time']:.2f} s after the "
                                     f"first fault ({clock(first_fault['time'])})."))
    out.append(("Trigger and detection", detect))
    res = [Block("table", head=("time", "group", "new master", "was", "kill to promotion"),
                 rows=tuple((clock(f["time"]), f.get("subject", ""), f.get("new_master", ""),
                             f.get("old_master", ""),
                             "-" if f["unavailable_s"] is None else f"{f['unavailable_s']:.2f} s")
                            for f in failovers))] if failovers else \
        [Block("p", "No failover in the window.")]
    res.append(Block("table", head=("time", "fuse", "broker", "event", "why"),
                     rows=tuple((clock(e["time"]), e.get("producer", ""), e.get("subject", ""),
                                 e.get("event", ""), e.get("reason") or "") for e in fuse))
               if fuse else Block("p", "The fuse isolated no broker."))
    out.append(("Resolution", res))
    out.append(("Action items", [Block("table", head=("action", "type", "owner", "issue"),
                                       rows=(("", "", "", ""),) * 3)]))
    out.append(("Lessons learned", [Block("blank", "What went well?"),
                                    Block("blank", "What went wrong?"),
                                    Block("blank", "Where did we get lucky?")]))
    out.append(("Timeline", [Block("table", head=("time", "kind", "severity", "what"),
                                   rows=tuple((clock(e["time"]), e["kind"], e["severity"],
                                               e["text"]) for e in inc.events))
                             if inc.events else Block("p", "No events in the window.")]
                + ([Block("p", f"{inc.unreadable} event line(s) cut short were skipped.")]
                   if inc.unreadable else [])))
    support = [Block("table", head=("broker", "send requests", "messages", f"worst {WINDOW_S} s p99", "max",
                                    f"windows over {ms(MAX_GOAL_S)}"),
                     rows=tuple((b.name, f"{b.sends:,}", f"{b.msgs:,}", ms(b.worst_p99), ms(b.worst_max), n)
                                for b, n in over))] if inc.brokers else []
    if charts and inc.brokers:
        support += [Block("img", text="send latency heatmap, every broker", png=_heatmap(inc)),
                    Block("img", text=f"send p99 per {WINDOW_S} s, per broker", png=_p99(inc))]
    out.append(("Supporting information", support or [Block("p", "No metrics log.")]))
    return out


def _heatmap(inc: Incident) -> bytes:
    from heatmap.matrix import build_heatmap
    from heatmap.png import render_png

    matrix = build_heatmap([(clock(t), h) for t, h in inc.columns], schema=2)
    return render_png(matrix, title=f"sends, all brokers, {WINDOW_S} s columns",
                      figsize=(11.0, 3.6), dpi=90)


def _p99(inc: Incident) -> bytes:
    with figure(11.0, 3.6, dpi=90) as (fig, ax):
        from matplotlib.ticker import MaxNLocator

        for b in inc.brokers:
            ax.plot([clock(t) for t in b.starts],
                    [None if v is None else v * 1000 for v in b.p99], label=b.name)
        ax.axhline(P99_GOAL_S * 1000, color="grey", linestyle="--", linewidth=1)
        ax.set_yscale("log")
        ax.set_ylabel("p99, ms")
        ax.tick_params(axis="x", labelrotation=45, labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(14))
        ax.legend(fontsize=7, ncol=4)
        fig.tight_layout()
        return figure_png(fig)


def title(inc: Incident) -> str:
    return f"Post-mortem: {inc.data.name}, {day(inc.since)} {clock(inc.since)}-{clock(inc.until)}"


def render_html(inc: Incident) -> str:
    parts = [f"<h1>{html.escape(title(inc))}</h1>",
             "<p class=meta>Status: draft. Authors: . Written from "
             f"<code>{html.escape(str(inc.data))}</code> by <code>floodgate incident "
             "export</code>.</p>"]
    for heading, blocks in sections(inc):
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        for b in blocks:
            if b.kind == "p":
                parts.append(f"<p>{html.escape(b.text)}</p>")
            elif b.kind == "blank":
                parts.append(f"<p class=blank>{html.escape(b.text)}</p>"
                             "<div class=fill contenteditable=true></div>")
            elif b.kind == "img":
                parts.append(img(b.png, b.text))
            else:
                head = "".join(f"<th>{html.escape(h)}</th>" for h in b.head)
                body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r)
                               + "</tr>" for r in b.rows)
                parts.append(f"<table><tr>{head}</tr>{body}</table>")
    return html_page(title(inc), CSS, parts)


def render_markdown(inc: Incident) -> str:
    lines = [f"# {title(inc)}", "", "Status: draft. Authors: ", ""]
    for heading, blocks in sections(inc, charts=False):
        lines += [f"## {heading}", ""]
        for b in blocks:
            if b.kind == "p":
                lines += [b.text, ""]
            elif b.kind == "blank":
                lines += [f"_{b.text}_", "", "", ""]
            elif b.kind == "table":
                lines.append("| " + " | ".join(b.head) + " |")
                lines.append("|" + "---|" * len(b.head))
                lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |"
                          for r in b.rows]
                lines.append("")
    lines.append("(The charts are in the HTML page.)")
    return "\n".join(lines) + "\n"


CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:24px auto;color:#222}
h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:28px}
td,th{text-align:left;border-bottom:1px solid #eee;font-size:13px}
.blank{color:#777;font-style:italic}.meta{color:#555}
.fill{min-height:2.5em;border:1px dashed #bbb;padding:4px;margin-bottom:8px}
"""
