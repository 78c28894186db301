"""ConsoleConfig: the schema of every console option, and where each comes from.

Order of sources, first wins: command-line flags, then environment variables
(FLOODGATE_CLUSTER, FLOODGATE_BROKERS, FLOODGATE_PRODUCERS,
FLOODGATE_PROMETHEUS, FLOODGATE_REFRESH), then the cluster file the flags or
environment name (its brokers), then the defaults below — and with nothing
given at all, ./cluster.toml if it exists.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from console.errors import UsageError
from heatmap.sla import SLA_MAX_S, SLA_MEAN_S


@dataclass
class ConsoleConfig:
    brokers: list[tuple[str, str]] = field(default_factory=list)  # (name, HTTP addr)
    # broker name -> its replicated group, from the cluster file: a group serves sends while
    # one member answers as its master (availability), a dead member's group still known
    groups: dict[str, str] = field(default_factory=dict)
    producers: list[str] = field(default_factory=list)  # producers' HTTP addrs (/stats)
    prometheus: str | None = None  # read figures from Prometheus instead of /stats
    replay: Path | None = None  # recorded /stats files instead of live brokers
    refresh: float = 1.0  # seconds between polls of one source
    timeout: float = 0.8  # per HTTP request; kept under `refresh`
    down_after: int = 2  # polls in a row without an answer before a broker is DOWN
    host_profile: str = "broker"  # kernel_tuning profile the Host screen verifies
    host_refresh: float = 5.0
    sla_max_s: float = SLA_MAX_S
    sla_mean_s: float = SLA_MEAN_S
    title: str = "floodgate"
    cluster: Path | None = None  # the cluster file: the trace screen asks its brokers

    def validate(self) -> ConsoleConfig:
        if self.refresh <= 0:
            raise UsageError("--refresh must be positive")
        if not (self.brokers or self.prometheus or self.replay):
            raise UsageError("no brokers: give --cluster FILE, --brokers ADDR,… or "
                             "--prometheus URL (or run `floodgate cluster up` here)")
        self.timeout = min(self.timeout, max(0.2, self.refresh * 0.8))
        return self


def parse_brokers(text: str) -> list[tuple[str, str]]:
    """`host:port,…` or `name=host:port,…` (HTTP addresses, the /stats port)."""
    out = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        name, _, addr = item.rpartition("=")
        host, _, port = addr.rpartition(":")
        if not host or not port.isdigit():
            raise UsageError(f"bad broker address {item!r}: expected HOST:PORT or NAME=HOST:PORT")
        out.append((name or addr, addr))
    if not out:
        raise UsageError("--brokers lists no address")
    return out


def brokers_from_cluster(path: Path) -> tuple[list[tuple[str, str]], dict[str, str]]:
    from broker_core.cluster.cluster_file import load_cluster

    return brokers_of(load_cluster(path))


def brokers_of(spec) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(name, HTTP addr) of each broker a cluster file lists, and the groups of those in
    one."""
    return ([(b.name, b.http) for b in spec.brokers],
            {b.name: b.group for b in spec.brokers if b.group})


def config_from_args(args, env: Mapping[str, str] | None = None) -> ConsoleConfig:
    env = os.environ if env is None else env

    def pick(attr: str, var: str):
        value = getattr(args, attr, None)
        return value if value not in (None, "") else (env.get(var) or None)

    cfg = ConsoleConfig()
    cluster, brokers = pick("cluster", "FLOODGATE_CLUSTER"), pick("brokers", "FLOODGATE_BROKERS")
    cfg.prometheus = pick("prometheus", "FLOODGATE_PROMETHEUS")
    replay = getattr(args, "replay", None)
    cfg.replay = Path(replay) if replay else None
    if brokers:
        cfg.brokers = parse_brokers(brokers)
    elif cluster:
        cfg.brokers, cfg.groups = brokers_from_cluster(Path(cluster))
    elif not cfg.prometheus and not cfg.replay and Path("cluster.toml").exists():
        cfg.brokers, cfg.groups = brokers_from_cluster(Path("cluster.toml"))
        cfg.cluster = Path("cluster.toml")
    if cluster:
        cfg.cluster = Path(cluster)
    producers = pick("producers", "FLOODGATE_PRODUCERS")
    if producers:
        cfg.producers = [p.strip() for p in producers.split(",") if p.strip()]
    refresh = pick("refresh", "FLOODGATE_REFRESH")
    if refresh is not None:
        try:
            cfg.refresh = float(refresh)
        except ValueError:
            raise UsageError(f"--refresh: not a number: {refresh!r}") from None
    if getattr(args, "profile", None):
        cfg.host_profile = args.profile
    return cfg.validate()
