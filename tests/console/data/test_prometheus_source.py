"""The --prometheus source against a real Prometheus scraping a real cluster."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request

import pytest

from broker_core.client.producer import Producer
from broker_core.cluster.ports import free_port_range
from console.data.prometheus_source import PrometheusBrokers
from console.data.state import build_state

pytestmark = pytest.mark.integration


def test_unreachable_prometheus_is_state_not_an_exception():
    port = free_port_range(1)
    samples = PrometheusBrokers(f"127.0.0.1:{port}", timeout=0.5).fetch()
    assert len(samples) == 1 and samples[0].stats is None
    assert samples[0].error == "prometheus: connection refused"
    assert build_state(samples, now=1).brokers[0].state == "DOWN"


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus not installed")
def test_figures_per_broker_from_prometheus(cluster3, tmp_path):
    targets = ", ".join(f"'{b.http}'" for b in cluster3.file.brokers)
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s}\n"
        f"scrape_configs:\n  - job_name: floodgate\n    static_configs: [{{targets: [{targets}]}}]\n")
    port = free_port_range(1)
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    producer = Producer(cluster3.file.addrs, fuse=False)
    try:
        source = PrometheusBrokers(f"127.0.0.1:{port}", timeout=2)
        deadline = time.monotonic() + 30
        samples = []
        while time.monotonic() < deadline:
            for _ in range(30):
                producer.send("prom", b"x")
            samples = source.fetch()
            # every figure asserted below, each from its own query: Prometheus may answer
            # one before the scrape that gives another its second sample
            views = build_state(samples, now=time.time()).brokers if samples else ()
            if len(samples) == 3 and all(b.in_per_s and b.p50 and b.p99 and b.max
                                         and b.disk_used_ratio and b.send_failures is not None
                                         for b in views):
                break
            time.sleep(0.5)
        assert [s.name for s in samples] == ["broker-1", "broker-2", "broker-3"]
        state = build_state(samples, now=time.time())
        for b in state.brokers:
            assert b.state in ("UP", "SLOW") and b.in_per_s > 0
            assert (b.errors, b.send_failures) == (0, 0)  # counted, and none failed
            assert 0 < b.p50 <= b.p99 <= b.max and 0 < b.disk_used_ratio < 1
            assert b.history == ()  # no per-second heatmap from Prometheus
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/healthy", timeout=2) as r:
            assert r.status == 200
    finally:
        producer.close()
        proc.terminate()
        proc.wait(10)
