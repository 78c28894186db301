"""Reports through a warm Spark: a client session on a Spark Connect server.

A local run starts a JVM and pays Spark's first-query cost (planning, code
generation, class loading) on every `floodgate report`; a Connect server
(`floodgate spark up`, or any Spark 4 Connect endpoint) has paid it already.
The jobs are the same DataFrame code either way: only the session differs,
and what the driver does with files. A Connect client has no JVM of its own,
so listing days and staging outputs go through the local file system:
`--input` and `--out` must be paths the server sees at the same place (the
same host, or a mount shared by both). hdfs:// and s3a:// reports run with
spark-submit, whose driver has Hadoop.
"""

from __future__ import annotations

import atexit
import os
import socket
import uuid
from urllib.parse import urlparse

from spark_reports.errors import ReportError

DEFAULT_PORT = 15002  # Spark Connect's own default (spark.connect.grpc.binding.port)
REMOTE_ENV = "SPARK_REMOTE"  # the variable Spark's own clients read
# Reports share one session on a server: Spark compiles generated code and starts Python
# workers per session (each session has its own class loader), so a report in a new
# session paid 4-6 s that the previous report had already paid (measured: the heatmap's
# pass 6.6-9.3 s in a new session, 2.1-2.9 s in the shared one). A session the server
# closed (idle past its timeout) is never reopened: the next id in turn takes over.
SHARED_SESSIONS = 16
_SHARED = uuid.UUID("6f1c2a4e-8d3b-4c7a-9e2f-0f100d9a7e00")


def parse_remote(url: str) -> tuple[str, int]:
    """(host, port) of sc://HOST[:PORT][/;params]; ReportError if it is not one."""
    parsed = urlparse(url.strip())
    if parsed.scheme != "sc" or not parsed.hostname:
        raise ReportError(f"--remote: expected sc://HOST:PORT, got {url!r}")
    try:
        port = parsed.port or DEFAULT_PORT
    except ValueError:
        raise ReportError(f"--remote: bad port in {url!r}") from None
    return parsed.hostname, port


def remote_from(asked: str | None, master: str | None = None) -> str | None:
    """The Connect URL a report should use: --remote, else $SPARK_REMOTE unless a
    --master was given (a master asks for a classic driver of our own)."""
    if asked:
        return asked
    if master or "PYSPARK_GATEWAY_PORT" in os.environ:  # spark-submit's driver wins
        return None
    return os.environ.get(REMOTE_ENV) or None


def answers(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """Whether something accepts TCP connections at host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def connect_session(url: str, app_name: str):
    """A Spark Connect session on ``url``, in UTC; ReportError within a second when
    nothing listens there (the client would otherwise retry for minutes)."""
    host, port = parse_remote(url)
    if not answers(host, port):
        raise ReportError(
            f"no Spark Connect server answers at sc://{host}:{port} "
            "(start one with `floodgate spark up`, or run without --remote)"
        )
    from pyspark.sql import SparkSession

    if "session_id=" in url:  # the user's own session
        return _configured(SparkSession.builder.remote(url).appName(app_name).getOrCreate())
    for k in range(SHARED_SESSIONS):
        named = with_session_id(url, shared_session_id(k))
        # No options (create() would send them before we can catch a closed session),
        # and the client closed at exit: with two sessions made in a process, the close
        # in a session's finalizer waited forever (measured).
        session = SparkSession.builder.remote(named).create()
        atexit.register(session.client.close)
        try:
            return _configured(session)
        except Exception as exc:  # noqa: BLE001 - pyspark's class for it varies by version
            if "SESSION_CLOSED" not in str(exc):
                raise
            _forget(session)
    session = SparkSession.builder.remote(url).create()
    atexit.register(session.client.close)
    return _configured(session)


def _forget(session) -> None:
    """A session the server had closed: its client closed, and no longer this process's
    default or active session. pyspark's column functions ask the active session for a
    setting; left active, the closed one failed a report's first aggregate
    (INVALID_HANDLE.SESSION_CLOSED) although the next session in turn was the one in use."""
    session.release_session_on_close = False  # the server closed it: nothing to release
    session.stop()


def shared_session_id(k: int) -> str:
    """The k-th id of the reports' shared session (the same on every client)."""
    return str(uuid.uuid5(_SHARED, str(k)))


def with_session_id(url: str, session_id: str) -> str:
    """sc://HOST:PORT[/;params] with ``;session_id=`` among its parameters."""
    base = url.strip().rstrip("/")
    return f"{base};session_id={session_id}" if ";" in base else f"{base}/;session_id={session_id}"


def _configured(session):
    """UTC, and the contract's timestamps (the first call: it tells whether the session
    is open)."""
    session.conf.set("spark.sql.session.timeZone", "UTC")
    session.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    return session


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect client session (no JVM on our side)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def local_only(spark, uri: str, flag: str) -> str | None:
    """The local path of ``uri`` when ``spark`` is a Connect session (None for a
    classic one, which reaches any URI through Hadoop); ReportError for a URI
    a Connect client cannot list or write."""
    if not is_connect(spark):
        return None
    from spark_reports.preflight import local_path

    path = local_path(uri)
    if path is None:
        raise ReportError(
            f"{flag} {uri}: through Spark Connect, reports read and write local paths "
            "(the server's at the same place); run spark-submit for other file systems"
        )
    return str(path)
