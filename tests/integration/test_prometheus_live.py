"""A real Prometheus (Debian's package) scrapes a real 2-broker cluster and a
producer under load, with the set-up `floodgate prometheus config` writes.

Through Prometheus' HTTP API: the recording rules' p99 sits within one
power-of-two bucket of each broker's own /stats p99; an injected write stall
fires the 20 ms alert. And every metric the dashboard and the rules name
exists on a live broker's or producer's /metrics.

Everything runs on free loopback ports in tmp dirs; Prometheus scrapes and
evaluates every second, and is killed in teardown with the rest.
"""

from __future__ import annotations

import json
import math
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker_core.cluster.launcher import Cluster
from broker_core.cluster.ports import free_port_range
from broker_core.observe.prometheus import ha_families
from console.cli import main
from console.commands.fault_cmd import call as fault_call
from console.observability.grafana_dashboard import build_dashboard, queries
from console.observability.prometheus_rules import rules_file
from console.observability.promql import metric_names
from tests import waiting

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not shutil.which("prometheus"), reason="prometheus missing: "
                       "scripts/setup.sh installs Debian's package"),
]




def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]




def get_json(url: str, timeout: float = 3.0):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=3) as resp:
        return resp.read().decode()


def wait_for(what: str, check, timeout: float, every: float = 0.25):
    return waiting.wait_for(check, timeout, what, every=every, ignore=(OSError,))


@dataclass
class Live:
    cluster: Cluster
    producer_http: str
    prometheus: str  # base URL

    def query(self, expr: str) -> list[dict]:
        url = f"{self.prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        return get_json(url)["data"]["result"]

    def alerts(self, name: str) -> list[dict]:
        return [a for a in get_json(f"{self.prometheus}/api/v1/alerts")["data"]["alerts"]
                if a["labels"]["alertname"] == name]


def spawn(argv: list[str], log: Path) -> subprocess.Popen:
    """Start a process with its stderr in `log` (kept for a failing run's post-mortem)."""
    with open(log, "wb") as err:
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err,
                                stdin=subprocess.DEVNULL)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prom-live")
    cluster = Cluster(2, free_port_range(4), tmp / "data")
    procs: list[subprocess.Popen] = []
    try:
        cluster.up()
        producer_port = free_port()
        procs.append(spawn(
            [sys.executable, "-m", "console.cli", "bench", "produce", "--cluster",
             str(cluster.path), "--duration", "120", "--rate", "300", "--concurrency", "4",
             "--http-port", str(producer_port)], tmp / "producer.log"))
        producer = f"127.0.0.1:{producer_port}"
        wait_for("producer /healthz", lambda: get_text(f"http://{producer}/healthz"), 15)

        out = tmp / "prom"
        assert main(["prometheus", "config", "--cluster", str(cluster.path), "--producers",
                     producer, "--out", str(out), "--scrape-interval", "1s"]) == 0
        prom_port = free_port()
        procs.append(spawn(
            ["prometheus", f"--config.file={out / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
            tmp / "prometheus.log"))
        live = Live(cluster, producer, f"http://127.0.0.1:{prom_port}")
        wait_for("prometheus ready", lambda: get_text(f"{live.prometheus}/-/ready"), 20)
        wait_for("3 targets up", lambda: len(live.query("up == 1")) == 3, 15)
        yield live
    finally:
        for proc in reversed(procs):
            stop(proc)
        cluster.down(grace=5)


def bucket(seconds: float) -> int:
    """Index of the power-of-two bucket (2**(k-1), 2**k] holding a value."""
    return math.ceil(math.log2(seconds))


def test_recording_rule_p99_within_one_bucket_of_broker_stats(live):
    rule = "broker:floodgate_send_latency_seconds:p99_rate1m"
    wait_for("p99 recorded for both brokers",
             lambda: len([r for r in live.query(rule) if r["value"][1] != "NaN"]) == 2, 20)

    def compare():
        prom = {r["metric"]["broker"]: float(r["value"][1]) for r in live.query(rule)}
        mismatches = []
        for b in live.cluster.file.brokers:
            own = get_json(f"http://{b.http}/stats")["ops"]["send"]["60s"]["p99"]
            if own is None or not math.isfinite(prom.get(b.name, math.nan)):
                mismatches.append((b.name, own, prom.get(b.name)))
            elif abs(bucket(prom[b.name]) - bucket(own)) > 1:
                mismatches.append((b.name, own, prom[b.name]))
        return mismatches

    # the rule's 1 m rate starts from a few scrapes, and the two windows are read a
    # moment apart: wait for them to agree
    deadline = time.monotonic() + 20
    while (mismatches := compare()) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert not mismatches, f"(broker, /stats p99, Prometheus p99): {mismatches}"


def test_injected_stall_fires_the_20ms_alert(live):
    name = "FloodgateSendOver20ms"
    target = live.cluster.file.brokers[0]

    def firing_value() -> float:
        return max([float(a["value"]) for a in live.alerts(name)
                    if a["state"] == "firing" and a["labels"]["broker"] == target.name],
                   default=0.0)

    before = firing_value()  # a loaded test machine may already have had a slow send
    fault_call(target.http, "POST", {"stall_ms": 200, "stall_every_s": 1, "duration_s": 20})
    try:
        alert = wait_for(
            f"{name} firing for {target.name}",
            lambda: [a for a in live.alerts(name) if a["state"] == "firing"
                     and a["labels"]["broker"] == target.name
                     and float(a["value"]) >= before + 3], 20, every=0.5)[0]
    finally:
        fault_call(target.http, "DELETE")
    assert alert["labels"]["severity"] == "page"
    assert target.name in alert["annotations"]["description"]
    assert alert["annotations"]["runbook"].startswith("Runbook:")


def live_names(live) -> set[str]:
    """Family and sample names on a live broker's and the producer's /metrics."""
    names: set[str] = set()
    for addr in (live.cluster.file.brokers[0].http, live.producer_http):
        for family in text_string_to_metric_families(get_text(f"http://{addr}/metrics")):
            names.add(family.name)
            if family.type == "counter":  # declared, if with no sample yet (nothing throttled)
                names.add(family.name + "_total")
            names.update(s.name for s in family.samples)
    return names


def test_every_metric_the_dashboard_and_rules_name_is_exported(live):
    exported = live_names(live) | {"up"}  # up: Prometheus' own, per target
    dashboard = set().union(*(metric_names(q) for q in queries(build_dashboard())))
    assert dashboard and not dashboard - exported, sorted(dashboard - exported)
    rules = [r for g in rules_file()["groups"] for r in g["rules"]]
    recorded = {r["record"] for r in rules if "record" in r}
    named = set().union(*(metric_names(r["expr"]) for r in rules))
    # this cluster is single-copy: the HA rules' metrics come from replicated brokers
    ha = {"group": "g", "role": "MASTER", "in_sync": ["s"],
          "slaves": [{"name": "s", "lag_bytes": 0, "lag_s": 0.0}]}
    replicated = {n for fam in ha_families("b", ha)
                  for n in (fam.name, *(s.name for s in fam.samples))}
    assert not named - exported - recorded - replicated, sorted(named - exported - recorded)
    ha_rules = next(g for g in rules_file()["groups"] if g["name"] == "floodgate.ha")["rules"]
    ha_named = set().union(*(metric_names(r["expr"]) for r in ha_rules))
    assert ha_named and not ha_named - replicated - {"up"}, sorted(ha_named - replicated)
    # and Prometheus has loaded every rule of the file
    loaded = get_json(f"{live.prometheus}/api/v1/rules")["data"]["groups"]
    assert sum(len(g["rules"]) for g in loaded) == len(rules)
