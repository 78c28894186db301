"""Scale-out shown, not claimed: a Spark standalone master and one worker, started
with PySpark's own daemon script on loopback, run `floodgate report heatmap
--master spark://...`, and its output equals a local run's (in the suite's own Spark
session: a second JVM for the local side cost ~25 s)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest

from broker_core.cluster.ports import free_port_range
from tests.report_rows import differences, rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def wait_until(check, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError(f"{what} not within {timeout_s} s")


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except OSError:
        return 0


@pytest.fixture
def standalone(tmp_path):
    """spark://127.0.0.1:PORT with one worker (1 core, 2 GiB); stopped at teardown."""
    if not os.path.exists(spark_home() / "sbin" / "spark-daemon.sh"):
        pytest.skip("this PySpark has no sbin/spark-daemon.sh")
    base = free_port_range(3)
    port, ui, worker_ui = base, base + 1, base + 2
    env = dict(
        os.environ, SPARK_HOME=str(spark_home()), SPARK_LOG_DIR=str(tmp_path / "logs"),
        SPARK_PID_DIR=str(tmp_path / "pids"), SPARK_IDENT_STRING=f"floodgate-test-{base}",
        SPARK_LOCAL_IP="127.0.0.1", SPARK_WORKER_DIR=str(tmp_path / "work"),
        SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    )  # fmt: skip
    # as an operator's spark-defaults.conf would: the test's queries are tiny, so its
    # executor gets the suite's C1-only JIT and serial GC, and a shuffle is 2 tasks on
    # the one core, not Spark's 200 (the report took 36 s, 29 s with these)
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        "spark.executor.defaultJavaOptions -XX:TieredStopAtLevel=1 -XX:+UseSerialGC\n"
        "spark.sql.shuffle.partitions 2\n")
    env["SPARK_CONF_DIR"] = str(conf)
    daemon = str(spark_home() / "sbin" / "spark-daemon.sh")
    url = f"spark://127.0.0.1:{port}"
    started = []

    def start(cls: str, *args: str) -> None:
        subprocess.run([daemon, "start", cls, "1", *args], env=env, check=True,
                       capture_output=True, timeout=60)  # fmt: skip
        started.append(cls)

    try:
        start(MASTER, "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui))
        wait_until(lambda: listening(port), 60, "the master")
        start(WORKER, "--host", "127.0.0.1", "--cores", "1", "--memory", "2g",
              "--webui-port", str(worker_ui), url)  # fmt: skip
        wait_until(lambda: alive_workers(ui) >= 1, 60, "the worker's registration")
        yield url, env
    finally:
        for cls in reversed(started):
            subprocess.run([daemon, "stop", cls, "1"], env=env, capture_output=True, timeout=60)


def start_report(env, log: Path, out: Path, master: str) -> subprocess.Popen:
    """The report on `master` in a process of its own: the test's local run goes on
    meanwhile (two JVMs at work on two cores: the test took 46 s one after the other)."""
    cmd = [sys.executable, "-m", "console.cli", "report", "heatmap", "--input", str(log),
           "--out", str(out), "--window", "1m", "--master", master, "--json"]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=Path(__file__).resolve().parents[2])  # fmt: skip


def finished(proc: subprocess.Popen) -> dict:
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        proc.kill()
    assert proc.returncode in (0, 1), err  # PASS or FAIL: the run itself worked
    return json.loads(out)


def embedded(out: Path) -> dict:
    page = (out / "report.html").read_text()
    return json.loads(re.search(r'id="floodgate-data">(.*?)</script>', page, re.S)[1])


def test_report_on_a_standalone_cluster_equals_the_local_run(standalone, tmp_path, spark):
    from spark_reports.generator import Double11Config, generate_double11
    from spark_reports.jobs.heatmap import HeatmapOptions, run_heatmap

    url, env = standalone
    log = tmp_path / "log"
    start = datetime(2026, 11, 10, 23, 58, tzinfo=UTC)
    generate_double11(Double11Config(brokers=4, hours=0.1, start=start, seed=3), log)
    on_cluster = start_report(env, log, tmp_path / "cluster", url)
    local = run_heatmap(HeatmapOptions(input=str(log), out=str(tmp_path / "local"), window_s=60),
                        spark=spark)  # fmt: skip
    on_cluster = finished(on_cluster)
    for summary in (on_cluster, local):
        summary.pop("out")
        summary.pop("outputs")
    # floats to 1e-9 (tests/report_rows.py: the host's vector division, now and then)
    assert not differences(on_cluster, json.loads(json.dumps(local, default=str)))
    assert local["table"] == "latency_1m"
    keys = ("window_start", "broker", "op")
    for name, k in (("heatmap", (*keys, "bucket")), ("percentiles", keys)):
        differ = differences(rows(tmp_path / "cluster" / name, k), rows(tmp_path / "local" / name, k))
        assert not differ, f"{name} (cluster, local): {differ[:5]}"
    assert not differences(embedded(tmp_path / "cluster"), embedded(tmp_path / "local"))
    # the work ran on the worker: its executor left a directory behind
    assert any((tmp_path / "work").iterdir())
