"""prometheus.yml for a floodgate cluster: one job for the brokers, one for the
producers, the rules file beside it.

Brokers serving TLS (`cluster up --tls`) are scraped over https, trusting the
cluster's CA (without it every target read DOWN: the HTTP port speaks TLS only).
Every broker target carries `cluster` and `broker` target labels so that
`up` (and so the broker-down alert) names the broker. The broker's own series
carry the same `broker` label; `honor_labels` keeps the broker's value should
the two ever differ (the broker knows its name better than a config file).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from broker_core.fsutil import atomic_write
from console.observability.errors import ObservabilityError
from console.observability.prometheus_rules import BROKER_JOB, PRODUCER_JOB, rules_file

RULES_FILE = "floodgate.rules.yml"
CONFIG_FILE = "prometheus.yml"
_DURATION = re.compile(r"^([0-9]+(ms|s|m|h))+$")
_ADDR = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+:[0-9]{1,5}$")


@dataclass(frozen=True)
class BrokerTarget:
    name: str
    http: str  # host:port of /metrics


@dataclass
class ScrapeSpec:
    cluster: str
    brokers: list[BrokerTarget]
    producers: list[str] = field(default_factory=list)
    scrape_interval: str = "5s"
    evaluation_interval: str = "5s"
    alertmanagers: list[str] = field(default_factory=list)
    tls_ca: str = ""  # the brokers serve TLS signed by this CA (a file Prometheus reads)

    def validate(self) -> ScrapeSpec:
        for name in ("scrape_interval", "evaluation_interval"):
            value = getattr(self, name)
            if not _DURATION.match(value):
                raise ObservabilityError(f"{name} {value!r} is not a Prometheus duration "
                                         "(e.g. 5s, 1m)")
        if not self.brokers:
            raise ObservabilityError("no broker to scrape")
        for addr in [b.http for b in self.brokers] + self.producers + self.alertmanagers:
            check_addr(addr)
        return self


def check_addr(addr: str) -> str:
    if not _ADDR.match(addr) or not 0 < int(addr.rsplit(":", 1)[1]) < 65536:
        raise ObservabilityError(f"{addr!r} is not HOST:PORT")
    return addr


def parse_addrs(text: str | None) -> list[str]:
    """`A,B` -> ["A", "B"], each checked as HOST:PORT."""
    if not text:
        return []
    return [check_addr(a.strip()) for a in text.split(",") if a.strip()]


def scrape_spec_from_cluster(cluster_file, producers: list[str], **kwargs) -> ScrapeSpec:
    """From a broker_core ClusterFile (what `floodgate cluster up` wrote)."""
    brokers = [BrokerTarget(b.name, b.http) for b in cluster_file.brokers]
    tls_ca = str(Path(cluster_file.tls_ca).resolve()) if cluster_file.tls_ca else ""
    return ScrapeSpec(cluster_file.name, brokers, producers, tls_ca=tls_ca,
                      **kwargs).validate()


def prometheus_config(spec: ScrapeSpec, rules_path: str = RULES_FILE) -> dict:
    config: dict = {
        "global": {
            "scrape_interval": spec.scrape_interval,
            "evaluation_interval": spec.evaluation_interval,
        },
        "rule_files": [rules_path],
        "scrape_configs": [
            {
                "job_name": BROKER_JOB,
                "honor_labels": True,
                "static_configs": [
                    {"targets": [b.http], "labels": {"cluster": spec.cluster, "broker": b.name}}
                    for b in spec.brokers
                ],
                **({"scheme": "https", "tls_config": {"ca_file": spec.tls_ca}}
                   if spec.tls_ca else {}),
            }
        ],
    }
    if spec.producers:
        config["scrape_configs"].append({
            "job_name": PRODUCER_JOB,
            "static_configs": [{"targets": list(spec.producers),
                                "labels": {"cluster": spec.cluster}}],
        })
    if spec.alertmanagers:
        config["alerting"] = {"alertmanagers": [{"static_configs": [
            {"targets": list(spec.alertmanagers)}]}]}
    return config


def dump_yaml(data: dict) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=10_000,
                          allow_unicode=True)


def write_setup(spec: ScrapeSpec, out_dir: Path) -> dict[str, Path]:
    """Write prometheus.yml and floodgate.rules.yml into out_dir; returns their paths."""
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = {"config": out_dir / CONFIG_FILE, "rules": out_dir / RULES_FILE}
        header = "# Written by `floodgate prometheus config`; regenerate rather than edit.\n"
        atomic_write(paths["rules"], (header + dump_yaml(rules_file())).encode())
        atomic_write(paths["config"], (header + dump_yaml(prometheus_config(spec))).encode())
    except OSError as exc:
        raise ObservabilityError(f"{out_dir}: cannot write the Prometheus set-up: "
                                 f"{exc.strerror or exc}") from None
    return paths
