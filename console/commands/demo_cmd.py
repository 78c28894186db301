"""`floodgate demo`: a local cluster under load with injected faults, in the console.

`--headless N` runs N seconds without a terminal and prints a summary (`--json`:
acked, errors, brokers [{name, state, p99_s, max_s, faulted, faults, isolations}],
false_isolations, stall_detection [{broker, stall_at, isolated_at, delay_s,
within_goal}], client_lateness, excused, fuse_transitions [{time, broker, event,
reason}], faults [{time, broker, action}], health_goals [{goal, met}]). `--with-tui`
also runs the console in this process, headless at 200x50, stepping through its
screens: the real work `make demo` adds to the host beside the load (the producer
runs in a process of its own).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from console.commands.common import add_subparser, print_json
from console.errors import CommandFailed, UsageError
from console.logs import configure_logging

# What this kind of host (2 cores) carries with the whole demo on it and every health goal
# met (bench/README.md, `bench/system_cost.py --only demo`: 1.2-1.3 cores at 5,000).
RATE_REPLICATED = 5000.0
RATE_SINGLE = 2000.0


def register(sub) -> None:
    parser = add_subparser(sub, "demo", "a local cluster under load with injected faults, "
                                        "watched in the console")
    parser.add_argument("--brokers", type=int, default=6, help="brokers to start (6: fuse cap 1)")
    parser.add_argument("--groups", type=int, metavar="G",
                        help="replicated instead: G groups of master + slave, sync replication, "
                             "a controller and ZooKeeper; act 3 kills group-1's master "
                             "(make demo: 4)")
    parser.add_argument("--rate", type=float, metavar="MSGS_S",
                        help=f"messages per second (default {RATE_REPLICATED:g} with --groups, "
                             f"{RATE_SINGLE:g} without: what a 2-core host carries with every "
                             "broker's sends under the 20 ms max of the Double-11 SLA)")
    parser.add_argument("--no-faults", action="store_true", help="no fault script")
    parser.add_argument("--trace-rate", type=float, default=1.0, metavar="R",
                        help="share of messages traced, 0..1 (1: every message, keyed "
                             "order-N: `floodgate trace --key order-N` or the console's t)")
    parser.add_argument("--no-realtime", action="store_true",
                        help="the load, the brokers and billing at normal priority (by default "
                        "under SCHED_RR where this user may: root or CAP_SYS_NICE; each woken "
                        "one then preempts the console and the clients that may fall behind)")
    parser.add_argument("--plain-priority", action="store_true",
                        help="every part at the host's default priority: no SCHED_RR, no nice "
                        "level for the console, no idle class for the clients that may fall "
                        "behind, the demo's session not weighted against the terminal's others "
                        "(what those buy, measured)")
    parser.add_argument("--no-tls", action="store_true",
                        help="plain TCP and HTTP (by default every broker port speaks TLS, "
                        "signed by a CA made in the data dir)")
    parser.add_argument("--no-acl", action="store_true",
                        help="brokers without access control (by default each demo client "
                        "is a user of its own, allowed only what its job needs)")
    parser.add_argument("--no-clients", action="store_true",
                        help="no consumer groups and no throttled batch producer")
    parser.add_argument("--no-rocketmq", action="store_true",
                        help="without the RocketMQ application on the brokers' gRPC ports "
                        "(a producer at 10 msgs/s and a SimpleConsumer, group rmq-audit)")
    parser.add_argument("--headless", type=float, metavar="SECONDS",
                        help="run this long without the TUI, then print a summary")
    parser.add_argument("--json", action="store_true", help="with --headless: JSON summary")
    parser.add_argument("--with-tui", action="store_true",
                        help="with --headless: run the console too (no terminal, 200x50), as "
                             "make demo does: its polling and drawing share the host with the "
                             "load")
    parser.add_argument("--data", type=Path, metavar="DIR",
                        help="keep the cluster's data here (default: a temporary dir, removed)")
    parser.add_argument("--base-port", type=int, default=20900, metavar="P",
                        help="broker i gets TCP P+2i and HTTP P+2i+1; the producer's /stats "
                             "the next port (20900)")
    parser.set_defaults(func=run)


def _check(args) -> None:
    if args.brokers < 1:
        raise UsageError("--brokers must be at least 1")
    if args.rate is not None and args.rate <= 0:
        raise UsageError(f"--rate must be positive, got {args.rate:g}")
    if not 0 <= args.trace_rate <= 1:
        raise UsageError("--trace-rate must be within [0, 1]")
    if args.headless is not None and args.headless <= 0:
        raise UsageError("--headless must be a positive number of seconds")
    if args.json and args.headless is None:
        raise UsageError("--json needs --headless SECONDS (the TUI is not JSON)")
    if args.with_tui and args.headless is None:
        raise UsageError("--with-tui needs --headless SECONDS (without it the TUI runs anyway)")
    if args.groups is not None and not 1 <= args.groups <= 16:
        # (0 ran six single-copy brokers: leave --groups out for those)
        raise UsageError(f"--groups must be between 1 and 16, got {args.groups} (without "
                         "--groups: single-copy brokers)")
    args.groups = args.groups or 0
    if args.rate is None:
        args.rate = RATE_REPLICATED if args.groups else RATE_SINGLE
    ports = 3 * 2 * args.groups + 2 if args.groups else 2 * args.brokers + 1
    if not 1024 <= args.base_port <= 65535 - ports:
        raise UsageError("--base-port must leave room for every broker below 65536")
    if args.headless is None and not sys.stdout.isatty():
        # Textual then draws an 80x24 frame into the pipe, over whatever the terminal shows
        raise UsageError("the console needs a terminal on stdout, and it is piped or "
                         "redirected (`make demo | tee`?): run it in a terminal, or use "
                         "--headless SECONDS for a run with a summary instead")


def run(args) -> int:
    from console.demo.runner import Demo, DemoOptions

    _check(args)
    opts = DemoOptions(args.brokers, args.rate, not args.no_faults, args.data, args.base_port,
                       groups=args.groups, clients=not args.no_clients,
                       trace_rate=args.trace_rate, acl=not args.no_acl, tls=not args.no_tls,
                       realtime=not args.no_realtime, priorities=not args.plain_priority,
                       rocketmq=not args.no_rocketmq)
    demo = Demo(opts)
    stop = threading.Event()
    log_file = demo.data_dir / "demo.log"
    temporary = demo.removes_data  # (no longer known once stopped: the dir is gone)
    where = ("logs on stderr" if args.headless is not None else f"logs in {log_file}") + (
        f" (data in {demo.data_dir}, removed at exit; --data DIR keeps it)" if temporary
        else f" (data in {demo.data_dir}, kept)")
    if args.headless is None:
        # Textual owns the terminal: logs go to a file (this run's own), not over the screen
        log_file.parent.mkdir(parents=True, exist_ok=True)
        configure_logging(logging.INFO, filename=str(log_file), force=True)
    what = (f"{args.groups} groups of master + slave (sync replication), a controller and "
            f"ZooKeeper" if args.groups else f"{args.brokers} brokers")
    if demo.realtime:
        what += " (the load, the brokers and billing under SCHED_RR)"
    elif opts.realtime and opts.priorities:  # refused: the latencies will say why
        what += " (at normal priority: SCHED_RR needs root or CAP_SYS_NICE, and 2 CPUs)"
    print(f"starting {what} on ports {args.base_port}.. and a producer at "
          f"{args.rate:g} msgs/s; {where} …", file=sys.stderr)
    demo_data = demo.data_dir
    demo.start()
    unweighted = demo.weigh_session()  # after the start: its stop() puts the weight back
    if unweighted is not None:
        logging.getLogger("floodgate.demo").info(
            "the demo's session keeps the host's default weight: %s", unweighted)
    from console.demo.runner import CONSOLE_NICE

    if opts.priorities:
        os.nice(CONSOLE_NICE)  # this thread only: the brokers and the load come first
    try:
        if args.headless is not None:
            for sig in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, lambda *_: stop.set())
            return _headless(demo, args, stop)
        from console.tui.app import FloodgateApp

        cluster_file = demo.data_dir / "cluster.toml"
        from console.demo.narration import scripted_acts

        acts = scripted_acts(args.groups, faults=not args.no_faults,
                             clients=not args.no_clients, brokers=args.brokers)
        app = FloodgateApp(demo.console_config(), hint=(
            f"{acts}. In another "
            f"terminal: floodgate status --cluster {cluster_file} --producers {demo.producer_addr}"),
            narration=_narration(demo))
        def quit_(*_) -> None:
            app.exit()
            # a console whose terminal went away (tmux killed, ssh dropped) may never get
            # to exit: the cluster must not outlive it
            threading.Thread(target=_exit_later, args=(demo,), daemon=True).start()

        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, quit_)
        app.run()
        return 0
    finally:
        demo.stop()
        if temporary:
            print(f"the demo's data ({demo_data}) was temporary and is removed: run it with "
                  "--data DIR to keep its events and metrics for `floodgate incident export`",
                  file=sys.stderr)
        elif demo.cluster is not None:  # the logs are closed at the brokers' stop
            print(f"the demo's data is kept in {demo_data}: its post-mortem with `floodgate "
                  f"incident export --data {demo_data} --out incident.html`; its heatmap with "
                  f"`floodgate report heatmap --input {demo.cluster.metrics_dir} --out DIR`",
                  file=sys.stderr)


def _narration(demo):
    """The console header's last words: what the demo's scripts do now."""
    from console.demo.narration import now_playing

    o = demo.opts
    return lambda: now_playing(demo.script_elapsed(), o.groups, o.brokers, faults=o.faults,
                               clients=o.clients)


def _exit_later(demo, grace_s: float = 5.0) -> None:
    time.sleep(grace_s)
    logging.getLogger("floodgate.demo").warning("the console did not exit: stopping the demo")
    demo.stop()
    os._exit(1)


def _headless(demo, args, stop: threading.Event) -> int:
    from console.demo.summary import health_goals, summarize_run

    seen: dict[str, list[str]] = {}  # consumer group -> the statuses it went through

    def track(state) -> None:
        for g in state.consumers if state else ():
            statuses = seen.setdefault(g.name, [])
            if not statuses or statuses[-1] != g.status:
                statuses.append(g.status)

    from console.demo.delays import summarize as consumer_delay

    def record(state) -> dict:
        """The run as it stands: taken at the end of the window, before the console
        (or poller) is torn down, so the summary covers exactly the N seconds."""
        transitions = demo.collect_transitions()
        return {**demo.load_totals(),
                **summarize_run(state.brokers if state else (), demo.actions, transitions,
                                demo.fuse_snapshot(), time.time()),
                "fuse_transitions": transitions,
                "consumer_groups": {g.name: {"status": g.status, "lag": g.lag,
                                             "drain_s": g.drain_s,
                                             "statuses": seen.get(g.name, [g.status])}
                                    for g in (state.consumers if state else ())},
                "consumer_delay": consumer_delay(demo.data_dir),
                "throttled_total": state.flow.total if state else 0,
                "transactions": _transactions(state),
                "idempotence": _idempotence(state),
                "faults": [{"time": a.time, "broker": a.broker, "action": a.action}
                           for a in demo.actions]}

    summary = (_run_with_tui if args.with_tui else _run_polling)(demo, args.headless, stop,
                                                                 record, track)
    summary["health_goals"] = [{"goal": words, "met": met}
                               for words, met in health_goals(summary)]
    if args.json:
        print_json(summary)
    else:
        _print_summary(summary)
    if not summary["acked"]:
        raise CommandFailed("no message was acknowledged")
    return 0


def _run_polling(demo, seconds: float, stop: threading.Event, record, track) -> dict:
    """The console's poller alone; the record of the run at its end."""
    from console.data.poller import Poller
    from console.data.sources import HttpBrokers, HttpProducers

    cfg = demo.console_config()
    poller = Poller(cfg, HttpBrokers(cfg.brokers, cfg.timeout),
                    HttpProducers(cfg.producers, cfg.timeout)).start()
    end = time.monotonic() + seconds
    try:
        while not stop.wait(min(1.0, max(0.0, end - time.monotonic()))):
            demo.collect_transitions()
            track(poller.state)
            if time.monotonic() >= end:
                break
    except KeyboardInterrupt:
        pass
    try:
        return record(poller.state)
    finally:
        poller.stop()


# What an SRE does in the console during a drill, one key every few seconds.
TUI_KEYS = ("enter", "c", "f", "c", "down", "enter", "c", "a", "c")
TUI_KEY_EVERY_S = 4.0


def _run_with_tui(demo, seconds: float, stop: threading.Event, record, track) -> dict:
    """The real console, headless in this process, stepping through its screens;
    the record of the run at its end."""
    from console.tui.app import FloodgateApp

    app = FloodgateApp(demo.console_config(), narration=_narration(demo))
    out: dict = {}

    async def drill(pilot) -> None:
        end = time.monotonic() + seconds
        step = 0
        next_key = time.monotonic() + TUI_KEY_EVERY_S
        while time.monotonic() < end and not stop.is_set():
            await pilot.pause(min(1.0, max(0.0, end - time.monotonic())))
            demo.collect_transitions()
            track(app.state)
            if time.monotonic() >= next_key:
                await pilot.press(TUI_KEYS[step % len(TUI_KEYS)])
                step += 1
                next_key += TUI_KEY_EVERY_S
        out.update(record(app.state))
        app.exit()

    app.run(headless=True, size=(200, 50), auto_pilot=drill)
    return out or record(app.state)


def _transactions(state) -> dict:
    """Half messages, queue locks and the ACL's refusals summed over the masters (a slave
    holds copies)."""
    out = {"halves": 0, "committed": 0, "checks": 0, "pending": 0, "rolled_back": {},
           "locks_held": 0, "acl_denied": 0, "offset_commits": 0, "fenced": 0}
    for b in state.brokers if state else ():
        if b.stats is None or b.role == "SLAVE":
            continue
        t = b.stats.transactions or {}
        for key, name in (("halves", "halves_total"), ("committed", "committed_total"),
                          ("checks", "checks_total"), ("pending", "pending"),
                          ("offset_commits", "offsets_committed_total"),
                          ("fenced", "fenced_total")):
            out[key] += int(t.get(name) or 0)
        for by, n in (t.get("rolled_back") or {}).items():
            out["rolled_back"][by] = out["rolled_back"].get(by, 0) + int(n)
        out["locks_held"] += int((b.stats.locks or {}).get("held") or 0)
        out["acl_denied"] += sum(int(d.get("count") or 0)
                                 for d in (b.stats.access or {}).get("denied") or [])
    return out


def _idempotence(state) -> dict:
    """Retries the brokers answered from their first try (stored once), and those too old
    to tell, summed over every broker (each counts those it answered)."""
    out = {"duplicates": 0, "expired": 0}
    for b in state.brokers if state else ():
        figures = (b.stats.idempotence if b.stats is not None else None) or {}
        for key in out:
            out[key] += int(figures.get(key) or 0)
    return out


def _print_summary(summary: dict) -> None:
    from console.data.state import BEHIND_SHARE
    from console.tui.format import clock, ms

    target, achieved = summary.get("target_rate"), summary.get("achieved_rate")
    rate = f"  {achieved:,.0f} of {target:,.0f} msgs/s" if target and achieved is not None else ""
    print(f"acked {summary['acked']:,}  errors {summary['errors']:,}{rate}")
    if target and achieved is not None and achieved < (1 - BEHIND_SHARE) * target:
        print(f"  the producer fell behind: {achieved / target:.0%} of its target (this host "
              f"is too busy for the rate: try --rate {achieved * 0.9:,.0f})")
    for b in summary["brokers"]:
        fault = ", ".join(b["faults"]) or "no fault"
        print(f"  {b['name']:10} {b['state']:9} p99 {ms(b['p99_s']):>10}  max {ms(b['max_s']):>10}"
              f"  {fault:14} isolated {b['isolations']}x")
    for f in summary["faults"]:
        print(f"  {clock(f['time'])} fault {f['broker']}: {f['action']}")
    for d in summary["stall_detection"]:
        when = "never" if d["delay_s"] is None else f"after {d['delay_s'] * 1000:.0f} ms"
        print(f"  stall on {d['broker']} at {clock(d['stall_at'])}: isolated {when}")
    isolations = [t for t in summary["fuse_transitions"] if t["event"] == "isolate"]
    print(f"fuse: {len(summary['fuse_transitions'])} transitions, {len(isolations)} isolations "
          f"({summary['false_isolations']} of a broker without a fault)")
    from console.demo.clients import WAREHOUSE_GROUP, script_story

    for name, g in summary["consumer_groups"].items():
        scripted = f"; scripted: {script_story()}" if name == WAREHOUSE_GROUP else ""
        print(f"  consumer group {name}: {g['status']}, lag {g['lag']:,} "
              f"(went {' -> '.join(g['statuses'])}{scripted})")
    for name, d in summary.get("consumer_delay", {}).items():
        print(f"  consumer group {name}: send -> in hand p50 {ms(d['p50_s'])}, p99 "
              f"{ms(d['p99_s'])}, max {ms(d['max_s'])} ({d['count']:,} messages, the first "
              f"10 s not counted)")
    print("health goals:")
    for g in summary["health_goals"]:
        print(f"  {'met   ' if g['met'] else 'MISSED' if g['met'] is False else 'n/a   '} "
              f"{g['goal']}")
    ide = summary["idempotence"]
    print(f"idempotent sends: {ide['duplicates']:,} retries answered from their first try "
          f"(stored once), {ide['expired']:,} too old to tell")
    if summary["throttled_total"]:
        print(f"flow control: {summary['throttled_total']:,} sends throttled")
    tx = summary["transactions"]
    if tx["halves"]:
        rolled = ", ".join(f"{k} {v:,}" for k, v in sorted(tx["rolled_back"].items()))
        print(f"transactions: {tx['halves']:,} half messages, {tx['committed']:,} committed, "
              f"rolled back {rolled or 'none'}, {tx['checks']:,} check-backs, "
              f"{tx['pending']:,} pending; orderly queue locks held: {tx['locks_held']}; "
              f"requests the ACL refused: {tx['acl_denied']:,}")
    if tx.get("offset_commits"):
        print(f"exactly once (the ledger): {tx['offset_commits']:,} transactions committed "
              f"its output with its offsets, {tx['fenced']:,} fenced")
