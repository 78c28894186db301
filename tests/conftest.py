"""Fixtures shared across test packages.

`spark`: one local SparkSession for the whole run (starting a JVM costs
seconds), sized for a 2-core machine shared with others: local[2], no UI,
two shuffle partitions, UTC everywhere so timestamps mean the same thing in
Spark, pyarrow and DuckDB. Tests that use it are skipped without Java.
"""

from __future__ import annotations

import os
import shutil

import pytest


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.skip("no Java runtime: run scripts/setup.sh")
    from pyspark.sql import SparkSession

    utc = "-Duser.timezone=UTC"
    session = (
        SparkSession.builder.master("local[2]")
        .appName("floodgate-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", utc)
        .config("spark.executor.extraJavaOptions", utc)
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
