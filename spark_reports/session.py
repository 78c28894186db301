"""Getting a SparkSession for a report job: UTC, quiet logs, a progress bar.

Under spark-submit the session already exists (master, resources and logging
are the submitter's); we only set the SQL time zone, which every job needs
so that `date=` partitions and windows are UTC days and minutes.
"""

from __future__ import annotations

import os
import tempfile

# Spark's own INFO/WARN chatter is noise for someone reading a report run;
# errors still show, and the console progress bar is not a log line.
_QUIET_LOG4J2 = """\
# Spark prints a "Setting default log level" banner when its shell logger
# (an org.* class) and the root disagree: both are at ERROR.
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.org.name = org
logger.org.level = error
logger.io.name = io
logger.io.level = error
logger.com.name = com
logger.com.level = error
"""


def _quiet_log_config() -> str:
    path = os.path.join(tempfile.gettempdir(), "floodgate-spark-log4j2.properties")
    current = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            current = fh.read()
    if current != _QUIET_LOG4J2:
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(_QUIET_LOG4J2)
        os.replace(tmp, path)
    return path


def get_session(
    master: str | None = None, app_name: str = "floodgate-report", progress: bool = True
):
    """The active session, or a new one on `master` (default local[*])."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.conf.set("spark.sql.session.timeZone", "UTC")
        return active
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started us: its master
    if not master and not submitted:
        master = os.environ.get("FLOODGATE_SPARK_MASTER") or "local[*]"
    java_opts = f"-Duser.timezone=UTC -Dlog4j2.configurationFile=file:{_quiet_log_config()}"
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.ui.showConsoleProgress", "true" if progress else "false")
        .config("spark.ui.enabled", "false")
    )
    if master:
        builder = builder.master(master)
    if master and master.startswith("local"):
        # 200 shuffle partitions is for clusters; a laptop wants a few per core.
        builder = builder.config("spark.sql.shuffle.partitions", str(4 * (os.cpu_count() or 2)))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
