"""`floodgate prometheus config`: a Prometheus set-up for a running cluster."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from console.commands.common import add_subparser, print_json
from console.errors import CommandFailed, UsageError


def register(sub) -> None:
    parser = add_subparser(sub, "prometheus", "Prometheus scrape config, recording rules, alerts")
    psub = parser.add_subparsers(metavar="ACTION")
    config = add_subparser(psub, "config",
                           "write prometheus.yml and floodgate.rules.yml for a cluster")
    config.add_argument("--cluster", type=Path, required=True, metavar="FILE",
                        help="the cluster.toml that `floodgate cluster up` wrote")
    config.add_argument("--producers", metavar="ADDR[,ADDR…]",
                        help="HTTP addresses of producers (bench produce --http-port) to scrape")
    config.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="directory for prometheus.yml and floodgate.rules.yml")
    config.add_argument("--scrape-interval", default="5s", metavar="DURATION",
                        help="how often Prometheus scrapes (default 5s)")
    config.add_argument("--evaluation-interval", metavar="DURATION",
                        help="how often rules run (default: the scrape interval)")
    config.add_argument("--alertmanager", metavar="ADDR[,ADDR…]",
                        help="Alertmanager addresses to send alerts to")
    config.add_argument("--check", action="store_true",
                        help="run `promtool check config` on the result (needs promtool)")
    config.add_argument("--json", action="store_true")
    config.set_defaults(func=run_config)


def run_config(args) -> int:
    from broker_core.cluster.cluster_file import load_cluster
    from console.observability.errors import ObservabilityError
    from console.observability.prometheus_config import (
        parse_addrs,
        scrape_spec_from_cluster,
        write_setup,
    )

    try:
        producers = parse_addrs(args.producers)
        alertmanagers = parse_addrs(args.alertmanager)
        cluster = load_cluster(args.cluster)
        spec = scrape_spec_from_cluster(
            cluster, producers, scrape_interval=args.scrape_interval,
            evaluation_interval=args.evaluation_interval or args.scrape_interval,
            alertmanagers=alertmanagers)
    except ObservabilityError as exc:
        raise UsageError(str(exc)) from None
    paths = write_setup(spec, args.out)
    checked = None
    if args.check:
        checked = promtool_check(paths["config"])
    summary = {"config": str(paths["config"]), "rules": str(paths["rules"]),
               "brokers": [b.http for b in spec.brokers], "producers": spec.producers,
               "promtool": checked}
    if args.json:
        print_json(summary)
    else:
        print(f"wrote {paths['config']} ({len(spec.brokers)} brokers, "
              f"{len(spec.producers)} producers) and {paths['rules']}")
        if checked:
            print("promtool check config: SUCCESS")
        print(f"run: prometheus --config.file={paths['config']}")
    return 0


def promtool_check(config: Path) -> str:
    promtool = shutil.which("promtool")
    if not promtool:
        raise CommandFailed("--check needs promtool (Debian package prometheus)")
    proc = subprocess.run([promtool, "check", "config", str(config)], capture_output=True,
                          text=True, timeout=60)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines() or ["failed"]
        raise CommandFailed(f"promtool check config: {lines[-1]}")
    return "ok"
