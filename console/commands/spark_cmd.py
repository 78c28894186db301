"""`floodgate spark up|down|status`: a warm Spark for reports (a Spark Connect server).

floodgate spark up [--port 15002] [--master local[*] | spark://HOST:7077] [--host 127.0.0.1]
floodgate report heatmap --remote sc://localhost:15002 ...   (or SPARK_REMOTE=sc://...)
floodgate spark status [--port P] [--json]
floodgate spark down [--port P]
"""

from __future__ import annotations

import time
from pathlib import Path

from console.commands.common import add_subparser, port, positive_float, print_json
from console.errors import EXIT_FAILED, EXIT_OK, CommandFailed, UsageError


def register(sub) -> None:
    parser = add_subparser(
        sub, "spark", "a warm Spark for reports: a supervised Spark Connect server",
        epilog="Reports run through it with `--remote sc://HOST:PORT` or SPARK_REMOTE; "
        "their --input and --out must be paths the server sees at the same place.",
    )  # fmt: skip
    ssub = parser.add_subparsers(metavar="ACTION")
    p = add_subparser(ssub, "up", "start the server (supervised: started again if it dies)")
    _common(p)
    p.add_argument(
        "--master",
        default="local[*]",
        help="where the server runs jobs: local[*] (default) or spark://HOST:PORT",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (Spark Connect has no authentication: "
        "opening it lets anyone who reaches it run code)",
    )
    p.add_argument(
        "--driver-memory",
        metavar="SIZE",
        help="the server's heap, e.g. 4g (default: a quarter of memory, 1-4 GiB)",
    )
    p.add_argument(
        "--wait",
        type=positive_float,
        default=120.0,
        metavar="S",
        help="how long to wait for it to answer (120)",
    )
    p.add_argument(
        "--no-warm",
        dest="warm",
        action="store_false",
        help="skip the warm-up query (a report's first plan, paid once here)",
    )
    p.set_defaults(func=run_up)
    p = add_subparser(ssub, "status", "whether the server is up, its URL, log and restarts")
    _common(p)
    p.set_defaults(func=run_status)
    p = add_subparser(ssub, "down", "stop the server and its supervisor")
    _common(p)
    p.set_defaults(func=run_down)


def _common(p) -> None:
    from spark_reports.connect import DEFAULT_PORT

    p.add_argument("--port", type=port, default=DEFAULT_PORT, help=f"gRPC port ({DEFAULT_PORT})")
    p.add_argument(
        "--dir",
        type=Path,
        metavar="DIR",
        help="the server's state and logs (default ~/.floodgate/spark-connect-PORT)",
    )
    p.add_argument("--json", action="store_true")


def _folder(args) -> Path:
    from spark_reports.connect_server import default_dir

    return args.dir or default_dir(args.port)


def run_up(args) -> int:
    from spark_reports import connect_server as cs

    folder = _folder(args)
    if not (args.master.startswith(("local", "spark://"))):
        raise UsageError(f"--master: expected local[N] or spark://HOST:PORT, got {args.master!r}")
    got = cs.up(folder, args.port, args.host, args.master, args.driver_memory, args.wait)
    if args.warm and not got["already"]:
        got["warm_s"] = warm_up(got["url"])
    if args.json:
        print_json(got)
        return EXIT_OK
    if got["already"]:
        print(f"already up at {got['url']} (pid {got['supervisor_pid']}); log {got['log']}")
        return EXIT_OK
    warm = f", warmed in {got['warm_s']:.1f} s" if "warm_s" in got else ""
    print(f"up at {got['url']} in {got['ready_s']:.1f} s{warm} (master {got['master']}, "
          f"supervisor pid {got['supervisor_pid']})")  # fmt: skip
    print(f"  log  {got['log']}")
    print(
        f"  use  floodgate report heatmap --remote {got['url']} ...  (or SPARK_REMOTE={got['url']})"
    )
    return EXIT_OK


def warm_up(url: str) -> float:
    """Both reports over a small generated log, through the server: the first report
    a user runs then finds the JIT and code generation of every query it makes paid.

    The heatmap runs twice, as a day's report (5-minute windows from the minute table,
    drill-downs read from the 1 s table's pages) and as an hour's (10 s windows from the
    1 s table), on 10 brokers x 2 h (3 s to generate): enough rows for the JVM to
    compile the hot loops of the real thing. The first report of the 100-broker day
    after `spark up`: 14.0-18.5 s after a 2-broker 6-minute warm-up, 12.9-13.7 s after
    this one (the next: 10-11 s either way); `spark up` takes ~15 s longer
    (bench/README, issue 31).
    """
    import argparse
    import tempfile
    from datetime import UTC, datetime

    from spark_reports.generator import Double11Config, generate_double11
    from spark_reports.jobs import capacity
    from spark_reports.jobs.heatmap import HeatmapOptions, run_heatmap

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="floodgate-warm-") as tmp:
        log = Path(tmp) / "log"
        start = datetime(2026, 11, 10, 23, 0, tzinfo=UTC)
        generate_double11(Double11Config(brokers=10, hours=2, start=start), log)
        for window_s in (300, 10):
            run_heatmap(HeatmapOptions(input=str(log), out=f"{tmp}/heatmap-{window_s}", remote=url,
                                       progress=False, window_s=window_s))  # fmt: skip
        parser = argparse.ArgumentParser()
        capacity.add_arguments(parser)
        capacity.run(parser.parse_args(["--input", str(log), "--out", f"{tmp}/capacity",
                                        "--target-date", "2027-11-11", "--remote", url, "--json"]))  # fmt: skip
    return time.monotonic() - t0


def run_status(args) -> int:
    from spark_reports import connect_server as cs

    st = cs.status(_folder(args))
    if args.json:
        print_json(st)
        return EXIT_OK if st["running"] else EXIT_FAILED
    if st["state"] == "none":
        raise CommandFailed(
            f"no Spark Connect server on port {args.port} (`floodgate spark up` starts one)"
        )
    if not st["running"]:
        last = f": {st['last_log'][-1]}" if st.get("last_log") else ""
        how = "the supervisor gave up after repeated exits" if st["state"] == "failed" \
            else "its supervisor is gone"  # fmt: skip
        raise CommandFailed(f"Spark Connect server on port {args.port} {st['state']} ({how}){last}; "
                            f"log {st['log']}; `floodgate spark up` starts it again")  # fmt: skip
    since = f", up {time.time() - st['up_since']:.0f} s" if st.get("up_since") else ""
    answer = "answers" if st["answers"] else "does not answer yet"
    print(f"{st['state']} at {st['url']}{since}: {answer} (master {st['master']}, "
          f"restarts {st['restarts']}, supervisor pid {st['supervisor_pid']})")  # fmt: skip
    print(f"  log  {st['log']}")
    return EXIT_OK


def run_down(args) -> int:
    from spark_reports import connect_server as cs

    got = cs.down(_folder(args))
    if args.json:
        print_json(got)
    elif got["stopped"]:
        print(f"stopped the Spark Connect server at {got['url']}")
    else:
        print(f"no Spark Connect server on port {args.port}: nothing to stop")
    return EXIT_OK
