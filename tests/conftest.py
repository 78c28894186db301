"""Fixtures shared across test packages.

`spark`: one local SparkSession for the whole run (starting a JVM costs
seconds), sized for a 2-core machine shared with others: local[2], no UI,
two shuffle partitions, UTC everywhere so timestamps mean the same thing in
Spark, pyarrow and DuckDB. Tests that use it are skipped without Java.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from broker_core.cluster.ports import HIGH, LOW, free_port_range

# Each of `make test`'s parallel workers (and the processes it starts) draws ports from
# a share of its own (broker_core.cluster.ports): drawn from the whole range at once,
# one worker's broker found its port taken by another's, once in a few runs.
if (_worker := os.environ.get("PYTEST_XDIST_WORKER", "")).startswith("gw"):
    _share = (HIGH - LOW) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    _low = LOW + int(_worker[2:]) * _share
    os.environ["FLOODGATE_PORTS"] = f"{_low}-{_low + _share}"

# Spark's Python workers (the heatmap's merge) need this interpreter's pyarrow.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Test queries are tiny, so the JVMs tests start through spark-submit (a report's own
# driver, the Spark Connect server) get C1-only JIT and the serial GC as `spark` below
# does: a report of the suite's small log took 28 s, 22-24 s with them.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.skip("no Java runtime: run scripts/setup.sh")
    from pyspark.sql import SparkSession

    utc = "-Duser.timezone=UTC"
    # Test queries are tiny: C1-only JIT and the serial GC halve the JVM's CPU
    # time (measured: 21 s -> 12 s for the heatmap tests) on a shared 2-core box.
    driver_opts = f"{utc} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    session = (
        SparkSession.builder.master("local[2]")
        .appName("floodgate-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", driver_opts)
        .config("spark.executor.extraJavaOptions", utc)
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()




@pytest.fixture
def cluster_factory(tmp_path):
    """Start real broker processes: `cluster_factory(n=3, flush="async")` -> Cluster.

    Every cluster started is stopped (SIGTERM, then SIGKILL) at teardown.
    """
    from broker_core.cluster.launcher import Cluster

    clusters = []

    def make(n: int = 3, flush: str = "async", segment_size: str = "8M", **kwargs):
        # TCP and HTTP a broker; with gRPC (cluster up --grpc) one more a broker, after
        # all of those and one spare (cluster.members.ports_taken)
        base = free_port_range(3 * n + 1 if kwargs.get("grpc") else 2 * n)
        cluster = Cluster(n, base, tmp_path / f"cluster-{len(clusters)}", flush=flush,
                          segment_size=segment_size, **kwargs)
        clusters.append(cluster)
        cluster.up()
        return cluster

    yield make
    for cluster in clusters:
        cluster.down(grace=5.0)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """One real single-node ZooKeeper (Debian's package) on a free loopback port for the
    session; tests keep apart by using their own root path (`zk_root`)."""
    from broker_core.cluster.zookeeper import ZooKeeperServer, available

    why = available()
    if why:
        pytest.skip(why)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    _warm_up(server.addr)
    yield server
    server.stop()


def _warm_up(addr: str) -> None:
    """A few hundred requests through a fresh JVM before the first test: its first ones
    (class loading, the JIT) stalled the server past the 0.5-1 s sessions the HA tests
    use ("outstanding heartbeat ping not received"), and a session ended that no test
    meant to end."""
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=addr, timeout=10.0)
    zk.start(timeout=30)
    try:
        for i in range(300):
            path = zk.create("/floodgate-warm-up/n", str(i).encode(), sequence=True,
                             makepath=True, ephemeral=i % 2 == 0)
            zk.set(path, b"x")
            zk.get(path)
            zk.delete(path)
        zk.delete("/floodgate-warm-up", recursive=True)
    finally:
        zk.stop()
        zk.close()


@pytest.fixture
def zk_root(request) -> str:
    """A ZooKeeper root path of this test's own (the session's server is shared)."""
    import re
    import uuid

    name = re.sub(r"[^A-Za-z0-9_-]", "_", request.node.name)[:60]
    return f"/floodgate-test/{name}-{uuid.uuid4().hex[:6]}"


def _module_scoped(item) -> bool:
    """Whether a test uses a fixture made once per module (a cluster, a server, a log)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(d[-1].scope in ("module", "package") for d in defs if d)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Under `pytest -n N --dist loadgroup` (make test), a fixture made once is made once
    for the run, not once per worker that happens to get one of its tests: every module
    that uses the `spark` session runs on one worker (one JVM for them, and one Spark
    Connect server for its module), and the tests of a module sharing a module-scoped
    fixture stay together. The slow tests are handed out first, so that none of them
    starts last and holds the run up on one worker while the others are done."""
    spark = {item.nodeid.split("::")[0] for item in items
             if "spark" in getattr(item, "fixturenames", ())}
    for item in items:
        module = item.nodeid.split("::")[0]
        if module in spark:
            item.add_marker(pytest.mark.xdist_group("spark"))
        elif _module_scoped(item):
            item.add_marker(pytest.mark.xdist_group(module))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable
