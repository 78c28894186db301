"""The floodgate Grafana dashboard, built with grafana-foundation-sdk.

Why this builder: grafana-foundation-sdk is Grafana Labs' own, generated from
the same schemas Grafana validates dashboards against and released alongside
each Grafana version, so its panel options and `schemaVersion` are those of a
current Grafana (we pin the build for Grafana 11.6, schemaVersion 41).
grafanalib, the older choice, has had no release since January 2024 and
still writes the old graph-panel era schema.

The queries read the brokers' and producers' raw series (not the recording
rules), so the dashboard works against any Prometheus that scrapes floodgate,
with or without floodgate.rules.yml loaded. `queries()` lists them so a test
can check every metric named exists on a live /metrics.
"""

from __future__ import annotations

import json

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import heatmap, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dash_model
from grafana_foundation_sdk.models import heatmap as heatmap_model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from broker_core.observe import metric_names as n
from fuse.export import FUSE_BROKER_ISOLATED, FUSE_CAP, FUSE_ISOLATED, FUSE_OVERFLOW
from heatmap.sla import SLA_MAX_MS, SLA_MAX_S, SLA_MEAN_MS, SLA_MEAN_S

DASHBOARD_UID = "floodgate-cluster"
DEFAULT_DATASOURCE = "Prometheus"
DS = dash_model.DataSourceRef(type_val="prometheus", uid="${datasource}")
BROKER = 'broker=~"$broker"'
RATE = "$__rate_interval"


def query(expr: str, legend: str = "", ref: str = "A", fmt: PromQueryFormat | None = None):
    q = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DS)
    if legend:
        q = q.legend_format(legend)
    if fmt is not None:
        q = q.format(fmt)
    return q


def thresholds(*steps: tuple[float | None, str]):
    return (dash.ThresholdsConfig().mode(dash_model.ThresholdsMode.ABSOLUTE)
            .steps([dash_model.Threshold(value=v, color=c) for v, c in steps]))


def legend_table():
    return (common_b.VizLegendOptions().display_mode(common.LegendDisplayMode.TABLE)
            .placement(common.LegendPlacement.BOTTOM).show_legend(True)
            .calcs(["mean", "max", "lastNotNull"]))


def series_panel(title: str, unit: str, targets: list, description: str = "",
                 width: int = 12, height: int = 8, log2: bool = False, sla: float | None = None):
    panel = (timeseries.Panel().title(title).description(description).datasource(DS)
             .unit(unit).span(width).height(height).legend(legend_table())
             .line_width(1).fill_opacity(10).show_points(common.VisibilityMode.NEVER))
    for target in targets:
        panel = panel.with_target(target)
    if log2:
        panel = panel.scale_distribution(
            common_b.ScaleDistributionConfig().type(common.ScaleDistribution.LOG).log(2))
    if sla is not None:  # draw the SLA as a red line
        panel = (panel.thresholds(thresholds((None, "green"), (sla, "red")))
                 .thresholds_style(common_b.GraphThresholdsStyleConfig()
                                   .mode(common.GraphThresholdsStyleMode.LINE)))
    return panel


def send_heatmap():
    """Classic buckets as a heatmap: one row per power-of-two `le`, log-2 y axis."""
    expr = (f"sum by (le) (increase({n.SEND_BUCKET}{{{BROKER}}}[{RATE}]))")
    return (heatmap.Panel().title("Send latency heatmap").datasource(DS)
            .description("Broker-side send RT, summed over the selected brokers. A vertical"
                         " stripe is a stall (PageCache, flush); a rising band is load.")
            .with_target(query(expr, "{{le}}", fmt=PromQueryFormat.HEATMAP))
            .span(24).height(10).calculate(False)
            .rows_frame(heatmap.RowsHeatmapOptions().layout(common.HeatmapCellLayout.LE))
            .y_axis(heatmap.YAxisConfig().unit("s").scale_distribution(
                common_b.ScaleDistributionConfig().type(common.ScaleDistribution.LOG).log(2)))
            .color(heatmap.HeatmapColorOptions().mode(
                heatmap_model.HeatmapColorMode.SCHEME).scheme("Oranges").steps(64)
                .scale(heatmap_model.HeatmapColorScale.EXPONENTIAL).exponent(0.5))
            .cell_values(heatmap.CellValues().unit("short"))
            .show_y_histogram().show_color_scale(True).show_legend())


def percentile_panel():
    buckets = f"sum by (broker, le) (rate({n.SEND_BUCKET}{{{BROKER}}}[{RATE}]))"
    targets = [query(f"histogram_quantile({q}, {buckets})", f"{{{{broker}}}} {label}", ref)
               for ref, (label, q) in zip("ABCD", (("p50", 0.5), ("p99", 0.99),
                                                   ("p999", 0.999), ("max", 1.0)), strict=True)]
    return series_panel(
        "Send RT p50 / p99 / p999 / max per broker", "s", targets,
        "From the power-of-two buckets: within one bucket of the broker's own /stats. "
        "max is the upper bound of the highest bucket hit. Red line: "
        f"the {SLA_MAX_MS:g} ms SLA.", width=16, log2=True, sla=SLA_MAX_S)


def average_panel():
    expr = (f"sum by (broker) (rate({n.SEND_SUM}{{{BROKER}}}[{RATE}]))"
            f" / sum by (broker) (rate({n.SEND_COUNT}{{{BROKER}}}[{RATE}]))")
    return series_panel("Send RT average", "s", [query(expr, "{{broker}}")],
                        f"Red line: the {SLA_MEAN_MS:g} ms average SLA.", width=8, sla=SLA_MEAN_S)


def over_20ms_panel():
    expr = f"sum by (broker) (increase({n.total(n.SEND_OVER_20MS)}{{{BROKER}}}[{RATE}]))"
    return (series_panel(f"Sends over {SLA_MAX_MS:g} ms", "short", [query(expr, "{{broker}}")],
                         "Exact count kept by the broker; any is an SLA breach.", width=8)
            .draw_style(common.GraphDrawStyle.BARS).fill_opacity(80))


def send_errors_panel():
    """The sends each broker failed itself (it is FAILING) apart from those it refused (a
    client's input, a topic's settings), per second."""
    failed = f"sum by (broker) (rate({n.total(n.SEND_FAILURES)}{{{BROKER}}}[{RATE}]))"
    errors = f"sum by (broker) (rate({n.total(n.SEND_ERRORS)}{{{BROKER}}}[{RATE}]))"
    return (series_panel("Sends failed and refused per second", "short",
                         [query(failed, "{{broker}} failed"),
                          query(f"{errors} - {failed}", "{{broker}} refused")],
                         "Failed: the broker's own (SYSTEM_ERROR, SYSTEM_BUSY, DISK_FULL, a "
                         "flush or slave timeout); any is a page. Refused: a client's input "
                         "or a topic's settings.", width=24, height=6)
            .draw_style(common.GraphDrawStyle.BARS).fill_opacity(80))


def rate_panel(direction: str):
    counter = n.MESSAGES_IN if direction == "in" else n.MESSAGES_OUT
    unit_msgs = [query(f"sum by (broker) (rate({n.total(counter)}{{{BROKER}}}"
                       f"[{RATE}]))", "{{broker}}")]
    title = "Messages in per second" if direction == "in" else "Messages out per second"
    return series_panel(title, "short", unit_msgs,
                        "Stored (in) or delivered to consumers (out), per broker.", width=8)


def fuse_panel():
    targets = [
        query(f"max by (producer, instance) ({FUSE_ISOLATED})",
              "isolated {{producer}} {{instance}}", "A"),
        query(f"max by (producer, instance) ({FUSE_CAP})", "cap {{producer}} {{instance}}",
              "B"),
        query(f"max by (producer, instance) ({FUSE_OVERFLOW})",
              "overflow {{producer}} {{instance}}", "C"),
    ]
    return series_panel("Fuse: isolated vs cap, overflow", "short", targets,
                        "Per producer. Isolated at the cap means the next slow broker stays in"
                        " service (overflow).", width=12)


def disk_panel():
    return (series_panel("Disk used", "percentunit",
                         [query(f"max by (broker) ({n.DISK_USED_RATIO}{{{BROKER}}})",
                                "{{broker}}")],
                         "Data disk of each broker; the alert fires over 75 %.", width=8,
                         sla=0.75).min(0).max(1))


def flush_lag_panel():
    return series_panel("Flush lag", "bytes",
                        [query(f"max by (broker) ({n.FLUSH_LAG_BYTES}{{{BROKER}}})",
                               "{{broker}}")],
                        "CommitLog bytes written but not yet flushed to disk.", width=8)


def consumer_lag_panel():
    return series_panel("Consumer lag", "short",
                        [query(f"sum by (broker, group) ({n.CONSUMER_LAG}{{{BROKER}}})",
                               "{{broker}} {{group}}")],
                        "Messages not yet consumed, per broker and consumer group.", width=8)


def consumer_status_panel():
    expr = f"max by (broker, group) ({n.GROUP_STATUS}{{{BROKER}}})"
    return (series_panel("Consumer group status", "short", [query(expr, "{{broker}} {{group}}")],
                         "The broker's verdict per group: 0 OK, 1 WARNING (lag growing),"
                         " 2 STALLED (alive, offsets not moving), 3 STOPPED (no consumer heard"
                         " from). Red line: the stall alert.", width=8, sla=2)
            .min(0).max(3))


def drain_panel():
    expr = f"max by (broker, group) ({n.GROUP_DRAIN}{{{BROKER}}})"
    return series_panel("Consumer time to drain", "s", [query(expr, "{{broker}} {{group}}")],
                        "Lag over the net consume rate; a gap: not catching up (or no data).",
                        width=8)


def throttled_panel():
    expr = (f"sum by (broker, topic, group) "
            f"(rate({n.total(n.FLOW_THROTTLED)}{{{BROKER}}}[{RATE}]))")
    return series_panel("Sends throttled by flow control", "short",
                        [query(expr, "{{broker}} {{topic}} from {{group}}")],
                        "Sends per second answered FLOW_CONTROL (over a topic's or producer"
                        " group's quota), per broker, topic and group.", width=8)


def isolated_brokers_panel():
    expr = f"max by (broker, reason) ({FUSE_BROKER_ISOLATED}{{{BROKER}}})"
    return (series_panel("Isolated brokers", "short", [query(expr, "{{broker}} ({{reason}})")],
                         "1 while some producer's fuse isolates the broker.", width=12)
            .draw_style(common.GraphDrawStyle.BARS).fill_opacity(60).min(0))


def delayed_panel():
    expr = f"sum by (broker, level) ({n.DELAYED_PENDING}{{{BROKER}}})"
    return series_panel("Delayed messages pending", "short",
                        [query(expr, "{{broker}} {{level}}")],
                        "Stored, not yet due (or due and not yet delivered), per delay level.",
                        width=8)


def overdue_panel():
    expr = f"max by (broker) ({n.DELAYED_OVERDUE}{{{BROKER}}})"
    return (series_panel("Delayed messages overdue", "s", [query(expr, "{{broker}}")],
                         "How long past its due time the oldest undelivered delayed message "
                         "is. Red line: the alert.", width=8, sla=1.0).min(0))


def dead_letters_panel():
    expr = f"max by (broker, group) ({n.DEAD_LETTERS}{{{BROKER}}})"
    return series_panel("Dead letters per consumer group", "short",
                        [query(expr, "{{group}} on {{broker}}")],
                        "Messages a group failed max_reconsume times (%DLQ%<group>), per broker "
                        "(a slave shows its master's copy); `floodgate dlq show` lists them.",
                        width=8)


def stat_panel(title: str, expr: str, unit: str, steps: list[tuple[float | None, str]]):
    return (stat.Panel().title(title).datasource(DS).span(6).height(4).unit(unit)
            .with_target(query(expr)).thresholds(thresholds(*steps)))


def overview_stats() -> list:
    sel = f"{{{BROKER}}}"
    return [
        stat_panel("Brokers up", 'sum(up{job="floodgate-broker"})', "short",
                   [(None, "red"), (1, "green")]),
        stat_panel("Send p99 (selected brokers)",
                   f"histogram_quantile(0.99, sum by (le) "
                   f"(rate({n.SEND_BUCKET}{sel}[{RATE}])))", "s",
                   [(None, "green"), (SLA_MEAN_S, "orange"), (SLA_MAX_S, "red")]),
        stat_panel(f"Sends over {SLA_MAX_MS:g} ms in range",
                   f"sum(increase({n.total(n.SEND_OVER_20MS)}{sel}[$__range]))", "short",
                   [(None, "green"), (1, "red")]),
        stat_panel("Messages in per second, total",
                   f"sum(rate({n.total(n.MESSAGES_IN)}{sel}[{RATE}]))", "short",
                   [(None, "blue")]),
    ]


def variables(datasource: str):
    ds_var = (dash.DatasourceVariable("datasource").label("Prometheus").type("prometheus")
              .current(dash_model.VariableOption(selected=True, text=datasource,
                                                 value=datasource)))
    broker_var = (dash.QueryVariable("broker").label("Broker").datasource(DS)
                  .query(f"label_values({n.SEND_COUNT}, broker)")
                  .refresh(dash_model.VariableRefresh.ON_TIME_RANGE_CHANGED)
                  .sort(dash_model.VariableSort.NATURAL_ASC)
                  .multi(True).include_all(True).all_value(".*")
                  .current(dash_model.VariableOption(selected=True, text="All",
                                                     value="$__all")))
    return [ds_var, broker_var]


def build_dashboard(datasource: str = DEFAULT_DATASOURCE) -> dict:
    """The dashboard as Grafana's JSON model (a dict)."""
    if not datasource or not datasource.strip():
        raise ValueError("the datasource name is empty")
    builder = (dash.Dashboard("floodgate cluster").uid(DASHBOARD_UID)
               .tags(["floodgate", "rocketmq"]).refresh("5s")
               .time("now-15m", "now").timezone("browser")
               .tooltip(dash_model.DashboardCursorSync.CROSSHAIR))
    for var in variables(datasource):
        builder = builder.with_variable(var)
    builder = builder.with_row(dash.Row("Overview"))
    for panel in overview_stats():
        builder = builder.with_panel(panel)
    builder = (builder.with_row(dash.Row("Send latency")).with_panel(send_heatmap())
               .with_panel(percentile_panel()).with_panel(average_panel())
               .with_row(dash.Row("Traffic and SLA")).with_panel(rate_panel("in"))
               .with_panel(rate_panel("out")).with_panel(over_20ms_panel())
               .with_panel(send_errors_panel())
               .with_row(dash.Row("Fuse")).with_panel(fuse_panel())
               .with_panel(isolated_brokers_panel())
               .with_row(dash.Row("Storage and consumers")).with_panel(disk_panel())
               .with_panel(flush_lag_panel()).with_panel(consumer_lag_panel())
               .with_row(dash.Row("Consumer groups and flow control"))
               .with_panel(consumer_status_panel()).with_panel(drain_panel())
               .with_panel(throttled_panel())
               .with_row(dash.Row("Delayed messages and dead letters"))
               .with_panel(delayed_panel()).with_panel(overdue_panel())
               .with_panel(dead_letters_panel()))
    return json.loads(json.dumps(builder.build(), cls=JSONEncoder))


def queries(model: dict) -> list[str]:
    """Every PromQL expression of a dashboard model: panels' targets and query variables."""
    exprs = []
    for panel in model.get("panels", []):
        for sub in [panel, *panel.get("panels", [])]:
            exprs.extend(t["expr"] for t in sub.get("targets", []) if t.get("expr"))
    for var in model.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            q = var.get("query")
            exprs.append(q["query"] if isinstance(q, dict) else q)
    return exprs
