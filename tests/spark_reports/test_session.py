"""What of the JVM's stderr reaches the user: Spark's progress bar only."""

from __future__ import annotations

from spark_reports import session
from spark_reports.session import split_progress

BAR = b"[Stage 3:=====>                  (1 + 1) / 2]"
CLEAR = b" " * 80


def test_progress_frames_pass_and_log_lines_do_not():
    stream = (
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        + b"\r" + BAR + b"\r"
        + b"00:46:47 ERROR Executor: Exception in task 1.0\n\tat org.apache.Foo(Foo.java:1)\n"
        + b"\r" + CLEAR + b"\r"
    )  # fmt: skip
    shown, rest = split_progress(stream)
    assert shown == b"\r" + BAR + b"\r" + b"\r" + CLEAR + b"\r"
    assert rest == b""


def test_records_split_across_reads_are_held_until_complete():
    shown, rest = split_progress(b"WARNING: Using incub")
    assert (shown, rest) == (b"", b"WARNING: Using incub")
    shown, rest = split_progress(rest + b"ator modules\n\r[Stage 0:>   (0 + 1) / 1]")
    assert (shown, rest) == (b"\r", b"[Stage 0:>   (0 + 1) / 1]")  # the bar's leading \r
    shown, rest = split_progress(rest + b"\r")
    assert (shown, rest) == (b"[Stage 0:>   (0 + 1) / 1]\r", b"")


def test_an_endless_record_is_not_held_forever():
    shown, rest = split_progress(b"x" * (session._MAX_PENDING + 1))
    assert (shown, rest) == (b"", b"")


class _JavaError(Exception):
    """Shaped like py4j's Py4JJavaError: the Java exception with its cause chain."""

    def __init__(self, chain):
        super().__init__("An error occurred while calling o82.collectToPython.\n: trace")
        self.java_exception = _Throwable(chain)


class _Throwable:
    def __init__(self, chain):
        self._chain = chain

    def toString(self):  # noqa: N802 - Java's name
        return self._chain[0]

    def getCause(self):  # noqa: N802
        return _Throwable(self._chain[1:]) if len(self._chain) > 1 else None


def test_failure_message_is_spark_reason_and_root_cause_and_keeps_the_log(monkeypatch):
    monkeypatch.setattr(session, "_log_path", "/tmp/floodgate-spark-1-x.log")
    monkeypatch.setattr(session, "_keep_log", False)
    exc = _JavaError([
        "org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 failed\nmore",
        "org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while "
        "reading file file:///log/b.parquet.  SQLSTATE: KD001",
        "java.lang.RuntimeException: footer is too large",
    ])  # fmt: skip
    assert session.failure_message(exc) == (
        "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///log/b.parquet: "
        "java.lang.RuntimeException: footer is too large "
        "(Spark's log: /tmp/floodgate-spark-1-x.log)"
    )
    assert session._keep_log
    monkeypatch.setattr(session, "_log_path", None)
    assert session.failure_message(ValueError("one\ntwo")) == "one"
