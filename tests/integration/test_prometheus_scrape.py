"""A real Prometheus (Debian's package) scrapes a broker under load; its
histogram_quantile over the exported classic buckets agrees with the broker's
own p99 to within one power-of-two bucket (the histogram contract, docs/architecture.md)."""

import json
import math
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from broker_core.client.producer import Producer

pytestmark = pytest.mark.integration


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_histogram_quantile_matches_broker_p99(cluster_factory, tmp_path):
    binary = shutil.which("prometheus")
    if not binary:
        pytest.skip("prometheus not installed: run scripts/setup.sh")
    cluster = cluster_factory(1)
    entry = cluster.file.brokers[0]
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: floodgate\n    static_configs: [{{targets: ['{entry.http}']}}]\n")
    prom = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        with Producer(cluster.file.addrs, fuse=False) as producer:
            futs = []
            for i in range(6000):
                futs.append(producer.send_async("scrape", b"x" * 256))
                if i % 500 == 0:
                    time.sleep(0.2)
            for f in futs:
                f.result(30)
        # the broker counts a second's sends once it closes that second (its tick)
        deadline = time.monotonic() + 10
        while (ours := _get(f"http://{entry.http}/stats?history=0")["ops"]["send"]["60s"]
               )["count"] < 6000:
            assert time.monotonic() < deadline, ours
            time.sleep(0.1)
        query = "histogram_quantile(0.99, floodgate_send_latency_seconds_bucket)"
        deadline = time.monotonic() + 30
        theirs = None
        while time.monotonic() < deadline:
            try:
                answer = _get(f"{base}/api/v1/query?query={urllib.parse.quote(query)}")
                result = answer["data"]["result"]
                count = _get(f"{base}/api/v1/query?query=floodgate_send_latency_seconds_count"
                             )["data"]["result"]
                if result and count and float(count[0]["value"][1]) >= ours["count"]:
                    theirs = float(result[0]["value"][1])
                    break
            except OSError:
                pass
            time.sleep(0.5)
        assert theirs is not None, "Prometheus never scraped the full count"
        assert ours["count"] >= 6000
        # both sit in the same power-of-two bucket, or neighbouring ones at worst
        assert abs(math.log2(theirs) - math.log2(ours["p99"])) <= 1.0, (theirs, ours["p99"])
    finally:
        prom.terminate()
        prom.wait(10)


def test_a_tls_cluster_is_scraped_over_https(cluster_factory, tmp_path, capsys, monkeypatch):
    """The config written for a `cluster up --tls` cluster scraped http:// from ports that
    speak TLS only: every broker read DOWN in Prometheus."""
    from broker_core.acl.tls import ENV_CA
    from console.cli import main

    monkeypatch.setenv(ENV_CA, "")  # a command given the cluster file sets it: unset after

    binary = shutil.which("prometheus")
    if not binary:
        pytest.skip("prometheus not installed: run scripts/setup.sh")
    cluster = cluster_factory(1, tls=True)
    assert main(["prometheus", "config", "--cluster", str(cluster.path), "--out",
                 str(tmp_path / "prom"), "--scrape-interval", "1s"]) == 0
    port = _free_port()
    prom = subprocess.Popen(
        [binary, f"--config.file={tmp_path / 'prom' / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, targets = time.monotonic() + 30, []
        while time.monotonic() < deadline:
            try:
                targets = _get(f"http://127.0.0.1:{port}/api/v1/targets")["data"][
                    "activeTargets"]
            except OSError:
                targets = []
            if targets and all(t["health"] != "unknown" for t in targets):
                break
            time.sleep(0.5)
        assert [(t["labels"]["broker"], t["scrapeUrl"].split(":")[0], t["health"],
                 t["lastError"]) for t in targets] == [("broker-1", "https", "up", "")]
    finally:
        prom.terminate()
        prom.wait(10)
