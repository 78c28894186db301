"""Getting a SparkSession for a report job: UTC, quiet, a progress bar on a terminal.

Under spark-submit the session already exists (master, resources and logging
are the submitter's); we only set the SQL time zone, which every job needs
so that `date=` partitions and windows are UTC days and minutes.

When we start the JVM ourselves, its stderr (the JVM's own warnings such as
"Using incubator modules", log4j, Spark's progress bar) goes to a log file,
not to the user's: a failing report prints one line, which points to the log
(`failure_message`). Spark's progress bar alone is passed through, and only
to a terminal. `debug=True` (or FLOODGATE_DEBUG=1) leaves the JVM's stderr
as it is and lets Spark log warnings.
"""

from __future__ import annotations

import atexit
import os
import re
import sys
import tempfile
import threading

# Spark's own INFO/WARN chatter is noise for someone reading a report run.
QUIET_LOG4J2 = """\
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

# Spark's ConsoleProgressBar writes "\r[Stage 3:==>   (1 + 1) / 2]\r" and clears
# with "\r<spaces>\r"; log lines end in "\n". Records end at either.
_PROGRESS = re.compile(rb"(\[Stage [^\r\n]*| *)\r")
_MAX_PENDING = 1 << 16  # a record longer than this is not a progress bar

_log_path: str | None = None
_keep_log = False


def _quiet_log_config() -> str:
    path = os.path.join(tempfile.gettempdir(), "floodgate-spark-log4j2.properties")
    current = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            current = fh.read()
    if current != QUIET_LOG4J2:
        from spark_reports.output import write_atomic

        write_atomic(path, QUIET_LOG4J2.encode())
    return path


def split_progress(pending: bytes) -> tuple[bytes, bytes]:
    """(progress-bar bytes to show, bytes not yet complete) from JVM stderr bytes.

    Complete records that are not progress-bar frames (log lines, warnings)
    are dropped here; the pump has already written everything to the log.
    """
    end = max(pending.rfind(b"\r"), pending.rfind(b"\n")) + 1
    done, rest = pending[:end], pending[end:]
    shown = b"".join(
        record for record in re.findall(rb"[^\r\n]*[\r\n]", done) if _PROGRESS.fullmatch(record)
    )
    return shown, (b"" if len(rest) > _MAX_PENDING else rest)


def _pump(fd: int, log, terminal) -> None:
    """Copy the JVM's stderr to the log; progress frames also to the terminal."""
    pending = b""
    try:
        while chunk := os.read(fd, 65536):
            try:
                log.write(chunk)
                log.flush()
            except (OSError, ValueError):
                pass  # a full disk must not stop the reading: the JVM would block on the pipe
            if terminal is not None:
                shown, pending = split_progress(pending + chunk)
                try:
                    terminal.write(shown)
                    terminal.flush()
                except (OSError, ValueError):
                    terminal = None
    except OSError:
        pass  # a traceback from this thread would be the very noise it exists to hold back
    finally:
        os.close(fd)
        log.close()


def _first_line(text: str | None) -> str:
    return next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")


def _java_reason(exc: BaseException) -> str | None:
    """The Java side's reason (py4j errors): Spark's innermost error-class message
    (names the file or column) and the root cause (the real reason), in one line."""
    j = getattr(exc, "java_exception", None)
    chain = []
    try:
        while j is not None and len(chain) < 32:
            chain.append(_first_line(str(j.toString())))
            j = j.getCause()
    except Exception:  # noqa: BLE001 - the JVM may be gone; fall back to Python's text
        pass
    if not chain:
        return None
    classed = [m for m in chain if re.search(r": \[[A-Z_.]+\] ", m)]
    root = chain[-1]
    if not classed or classed[-1] == root:
        return root
    spark_text = re.sub(r"\s*SQLSTATE: \w+\s*$", "", classed[-1].split(": ", 1)[1]).rstrip(" .")
    return f"{spark_text}: {root}"


def failure_message(exc: BaseException) -> str:
    """One line for a Spark or Java failure, pointing to the JVM's log, which is kept."""
    global _keep_log
    first = _java_reason(exc) or _first_line(str(exc)) or type(exc).__name__
    if _log_path is None:
        return first
    _keep_log = True
    return f"{first} (Spark's log: {_log_path})"


def _remove_log() -> None:
    if _log_path and not _keep_log:
        try:
            os.unlink(_log_path)
        except OSError:
            pass


def _launch_quiet_gateway(conf, show_progress: bool):
    """Start the JVM with its stderr in a log file (progress bar to a terminal)."""
    from pyspark.java_gateway import launch_gateway

    global _log_path
    fd, _log_path = tempfile.mkstemp(prefix=f"floodgate-spark-{os.getpid()}-", suffix=".log")
    log = os.fdopen(fd, "wb")
    atexit.register(_remove_log)
    read_end, write_end = os.pipe()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": write_end})
    finally:
        os.close(write_end)
        terminal = getattr(sys.stderr, "buffer", None) if show_progress else None
        threading.Thread(
            target=_pump, args=(read_end, log, terminal), name="jvm-stderr", daemon=True
        ).start()
    return gateway


def local_driver_memory() -> str:
    """A quarter of the machine's memory, 1 to 4 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "1g"
    return f"{max(1, min(4, total // 4 // 2**30))}g"


def get_session(
    master: str | None = None,
    app_name: str = "floodgate-report",
    progress: bool = True,
    debug: bool = False,
    remote: str | None = None,
):
    """The active session, a Spark Connect one on `remote` (or $SPARK_REMOTE when no
    `master` is given), or a new one on `master` (default local[*])."""
    from spark_reports.connect import connect_session, remote_from

    url = remote_from(remote, master)
    if url:
        return connect_session(url, app_name)
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    from spark_reports.output import current_umask

    active = SparkSession.getActiveSession()
    if active is not None:
        active.conf.set("spark.sql.session.timeZone", "UTC")
        return active
    debug = debug or os.environ.get("FLOODGATE_DEBUG") == "1"
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started us: its master
    if not master and not submitted:
        master = os.environ.get("FLOODGATE_SPARK_MASTER") or "local[*]"
    # A progress bar is for a person at a terminal, not for a log or a pipe.
    progress = progress and sys.stderr.isatty()
    java_opts = f"-Duser.timezone=UTC -Dlog4j2.configurationFile=file:{_quiet_log_config()}"
    conf = (
        SparkConf()
        .setAppName(app_name)
        .set("spark.sql.session.timeZone", "UTC")
        .set("spark.driver.extraJavaOptions", java_opts)
        .set("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
        .set("spark.ui.showConsoleProgress", "true" if progress else "false")
        .set("spark.ui.enabled", "false")
        # Parquet we write (compact's latency_1m) in the contract's type, not legacy INT96.
        .set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        # Hadoop applies its own umask (022) to the files it writes, not ours.
        .set("spark.hadoop.fs.permissions.umask-mode", f"{current_umask():03o}")
    )
    if master:
        conf.setMaster(master)
    if master and master.startswith("local"):
        # 200 shuffle partitions is for clusters; a laptop wants a few per core.
        conf.set("spark.sql.shuffle.partitions", str(4 * (os.cpu_count() or 2)))
        # local mode runs everything in the driver: Spark's 1 GiB default spills the
        # jobs' cached frames to disk on a day of 100 brokers. A heap is a ceiling, not taken.
        conf.set("spark.driver.memory", os.environ.get("FLOODGATE_SPARK_DRIVER_MEMORY")
                 or local_driver_memory())  # fmt: skip
        # The heatmap's merge runs in Python workers: ours, with numpy and pyarrow
        # (PySpark's default is whatever `python3` is on PATH; it reads the variable).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if not (debug or submitted or SparkContext._active_spark_context):
        SparkContext(conf=conf, gateway=_launch_quiet_gateway(conf, progress))
    session = SparkSession.builder.config(conf=conf).getOrCreate()
    session.sparkContext.setLogLevel("WARN" if debug else "ERROR")
    return session
