"""`floodgate status`: the console's health data once, as a table or JSON.

Exit 0 when every broker is UP, 1 when any is SLOW, FAILING, ISOLATED or DOWN. One
poll, so a broker that does not answer is DOWN at once (the console waits
for two refreshes). Consumer groups (one line each: status, lag, drain time)
and flow control (quotas, throttled sends) are reported, and a group that is
not OK is an alert, but they do not change the exit code: it says whether
the brokers serve. One poll has no earlier count to take a rate from, so
throttling is shown as totals since each broker started.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from console.commands.common import add_subparser, print_json


def register(sub) -> None:
    parser = add_subparser(sub, "status", "cluster health once: broker states, latency, fuse")
    add_source_args(parser)
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=run)


def add_source_args(parser) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--cluster", type=Path, metavar="FILE",
                        help="cluster.toml (from `floodgate cluster up`)")
    target.add_argument("--brokers", metavar="ADDR,…",
                        help="brokers' HTTP addresses (host:port of /stats), or name=host:port")
    target.add_argument("--prometheus", metavar="URL",
                        help="read the figures from Prometheus' HTTP API instead")
    # recorded /stats files instead of live brokers (tests, benchmarks): not for users
    target.add_argument("--replay", type=Path, metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--producers", metavar="HTTP_ADDR,…",
                        help="producers' /stats addresses, for fuse state (ISOLATED)")


def state_to_dict(state) -> dict:
    s = state.summary
    return {
        "time": state.now,
        "healthy": s.healthy,
        "summary": {"brokers": s.brokers, "by_state": dict(s.by_state),
                    "in_per_s": s.in_per_s, "out_per_s": s.out_per_s, "p99_s": s.p99,
                    "max_s": s.max, "mean_s": s.mean, "isolated": s.isolated,
                    "overflow": s.overflow, "cap": s.cap},
        "brokers": [{"name": b.name, "http": b.key, "state": b.state, "reason": b.reason,
                     "in_per_s": b.in_per_s, "out_per_s": b.out_per_s, "mean_s": b.mean,
                     "p50_s": b.p50, "p99_s": b.p99, "p999_s": b.p999, "max_s": b.max,
                     "over_20ms": b.over_20ms, "send_errors": b.errors,
                     "send_failures": b.send_failures, "last_failure": b.last_failure,
                     "last_refusal": b.last_refusal,
                     "disk_used_ratio": b.disk_used_ratio,
                     "flush_lag_bytes": b.flush_lag_bytes, "consumer_lag": b.consumer_lag,
                     **({"group": b.group, "role": b.role, "epoch": b.epoch,
                         "in_sync_slaves": b.in_sync, "repl_lag_bytes": b.repl_lag_bytes,
                         "repl_lag_s": b.repl_lag_s} if b.group else {})}
                    for b in state.brokers],
        "producers": [{"name": p.name, "http": p.key, "up": p.up, "error": p.error,
                       "excluded": p.excluded, "cap": p.counts.cap}
                      for p in state.producers],
        "consumers": [{"group": g.name, "status": g.status, "lag": g.lag,
                       "trend_per_s": g.trend_per_s, "consume_per_s": g.consume_per_s,
                       "produce_per_s": g.produce_per_s, "drain_s": g.drain_s,
                       "idle_s": g.idle_s, "brokers": list(g.brokers), "topics": list(g.topics),
                       "queues": [{"broker": q.broker, "topic": q.topic, "queue": q.queue,
                                   "committed": q.committed, "end": q.end, "lag": q.lag,
                                   "status": q.status} for q in g.queues]}
                      for g in state.consumers],
        "flow_control": {
            "quotas": [{"broker": q.broker, "kind": q.kind, "target": q.target,
                        "rate": q.rate, "burst": q.burst, "warmup_s": q.warmup_s}
                       for q in state.flow.quotas],
            "throttled": [{"broker": t.broker, "topic": t.topic, "group": t.group,
                           "total": t.total} for t in state.flow.throttled],
            "throttled_total": state.flow.total},
        "alerts": [a.message for a in state.active_alerts],
    }


def print_consumers(console, state) -> None:
    """One line per consumer group, then flow control's summary and throttled topics."""
    from rich.text import Text

    from console.data.consumers import lag_growing
    from console.tui.format import GROUP_STYLE, count, duration
    from console.tui.panels.throttling import summary

    width = max((len(g.name) for g in state.consumers), default=0)
    for g in state.consumers:
        line = Text(f"group {g.name:<{width}}  ")
        line.append(f"{g.status:<7}", style=GROUP_STYLE.get(g.status, ""))
        # no net progress: a steady lag when judged OK and not rising, else behind
        drain = f"drains in {duration(g.drain_s)}" if g.drain_s is not None else \
            "not draining" if g.status != "OK" else \
            "lag growing" if lag_growing(g) else "keeping up"
        line.append(f"  lag {count(g.lag)}  {drain}  ({', '.join(g.topics)})")
        console.print(line)
    if state.flow.active:
        console.print(summary(state.flow))
        for topic, group, total, _ in state.flow.by_topic():
            sender = f"group {group}" if group else "producers without a group"
            console.print(f"  throttled topic {topic} from {sender}: {count(total)}")


def run(args) -> int:
    from rich.console import Console

    from console.config import config_from_args
    from console.data.poller import Poller
    from console.tui.panels import render_panel

    cfg = config_from_args(args)
    cfg.down_after = 1
    cfg.timeout = 2.0
    poller = Poller.from_config(cfg)
    try:
        poller.poll_producers()
        state = poller.poll_brokers()
    finally:
        poller.stop()
    if args.json:
        print_json(state_to_dict(state))
    else:
        console = Console()
        if not console.is_terminal:
            console = Console(width=160)  # a pipe or a file: do not squeeze the table
        console.print(render_panel("summary", state))
        console.print(render_panel("brokers", state))
        print_consumers(console, state)
        if any((b.stats.delayed or {}).get("pending_total") for b in state.brokers
               if b.stats is not None):
            console.print("delayed messages, retries included (held in %SCHEDULE% until "
                          "due)")
            console.print(render_panel("delayed", state))
        stats = [b.stats for b in state.brokers if b.stats is not None]
        if any((s.transactions or {}).get("pending") for s in stats):
            console.print("transactional messages (half messages pending: `floodgate tx list`)")
            console.print(render_panel("transactions", state))
        if any((s.locks or {}).get("held") for s in stats):
            console.print("ordered queues (locks)")
            console.print(render_panel("queue_locks", state))
        for alert in state.active_alerts:
            word = "[cyan]info[/cyan]" if alert.severity == "info" else "[red]alert[/red]"
            console.print(f"{word} {alert.message}")
    return 0 if state.summary.healthy else 1
