"""The events log: what happened to a cluster and when, appended and never rewritten.

Every alert edge (raised, changed severity, cleared), fuse transition, failover,
injected fault, offset reset and operator command is one JSON line in
`events.jsonl`, beside the cluster's metrics log (the cluster file's directory):

    {"time": 1764330515.2, "kind": "alert", "severity": "critical",
     "subject": "consumer:warehouse", "text": "consumer group warehouse STALLED ...",
     "source": "console"}

Several processes append to one log (the console, the controller, the demo, an
operator's commands): each line is one write() to a file opened O_APPEND, under an
flock that rotation takes too, so lines never interleave and none is lost to a
rename. A line is fsynced: this is what the post-mortem is written from, and the
host may be the thing that failed. Past MAX_BYTES the log rolls to events.jsonl.1
(.2, ... up to KEEP), the oldest going; readers read the rolled files too.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

FILE_NAME = "events.jsonl"
MAX_BYTES = 8 * 1024 * 1024  # ~40,000 events a file: a night's worth at demo rates
KEEP = 4  # rolled files kept beside the live one
KINDS = ("alert", "fuse", "failover", "fault", "offsets", "quota", "command", "drill", "note")
SEVERITIES = ("critical", "warning", "info")


class EventLog:
    def __init__(self, path: str | os.PathLike, source: str,
                 clock: Callable[[], float] = time.time, max_bytes: int = MAX_BYTES,
                 keep: int = KEEP) -> None:
        """`path`: the log's file (a name ending .jsonl) or the directory to hold
        events.jsonl; `source`: who writes (console, controller, demo, command)."""
        self.path = live_file(path)
        self.source, self.clock = source, clock
        self.max_bytes, self.keep = max_bytes, keep

    def append(self, kind: str, text: str, *, severity: str = "info", subject: str = "",
               at: float | None = None, **fields) -> dict:
        """One event, written and synced before this returns; `at`: when it happened, if
        not now (a fuse transition reported a moment after it)."""
        if kind not in KINDS:
            raise ValueError(f"event kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {', '.join(SEVERITIES)}, "
                             f"got {severity!r}")
        doc = {"time": round(self.clock() if at is None else at, 3), "kind": kind,
               "severity": severity, "subject": subject, "text": text,
               "source": self.source, **fields}
        line = (json.dumps(doc, ensure_ascii=False, separators=(",", ":"), default=str)
                + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = self._locked_live()
        try:
            size = os.fstat(fd).st_size
            if size + len(line) > self.max_bytes:
                self._roll()
                os.close(fd)
                fd = self._locked_live()
                size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a writer died mid-line: this one starts a new one
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)  # closing releases the lock
        return doc

    def _locked_live(self) -> int:
        """The live file, opened and locked: if another writer rolled it while this one
        waited for the lock, the file it holds is a rolled one, so it opens again."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                    return fd
            except FileNotFoundError:
                pass
            os.close(fd)

    def _roll(self) -> None:
        """events.jsonl -> .1 -> .2 ...; the oldest past `keep` goes (holding the lock)."""
        if self.keep < 1:
            os.truncate(self.path, 0)
            return
        for i in range(self.keep, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{i}")
            newer = self.path if i == 1 else self.path.with_name(f"{self.path.name}.{i - 1}")
            if newer.exists():
                os.replace(newer, older)


def live_file(path: str | os.PathLike) -> Path:
    """The log's live file: `path` itself when it names a .jsonl file, else FILE_NAME in
    the directory `path` (which need not exist yet: a demo names its data dir first)."""
    path = Path(path)
    return path if path.suffix == ".jsonl" else path / FILE_NAME


def log_files(path: str | os.PathLike) -> list[Path]:
    """The live file and the rolled ones, oldest first."""
    live = live_file(path)
    rolled = sorted((p for p in live.parent.glob(f"{live.name}.*") if p.suffix[1:].isdigit()),
                    key=lambda p: -int(p.suffix[1:]))
    return [*rolled, *([live] if live.exists() else [])]


def scan(path: str | os.PathLike) -> tuple[list[dict], int]:
    """Every event of the log (the rolled files too), by time, in one pass; and how many
    lines were unreadable (cut short by a crash mid-write, or not JSON): skipped."""
    docs, bad = [], 0
    for file in log_files(path):
        with open(file, "rb") as f:
            for raw in f:
                doc = _parse(raw)
                if doc is None:
                    bad += 1
                else:
                    docs.append(doc)
    docs.sort(key=lambda d: d["time"])  # stable: writers' order within a millisecond
    return docs, bad


def read_events(path: str | os.PathLike, since: float | None = None,
                until: float | None = None, kinds: tuple[str, ...] | None = None
                ) -> list[dict]:
    """The events in [since, until] (either open), by time (`scan`'s, filtered)."""
    return [doc for doc in scan(path)[0]
            if (since is None or doc["time"] >= since) and (until is None or doc["time"] <= until)
            and (kinds is None or doc.get("kind") in kinds)]


def count_unreadable(path: str | os.PathLike) -> int:
    return scan(path)[1]


def _parse(raw: bytes) -> dict | None:
    """One line's event, or None when it is not one."""
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("time"), (int, float)) else None


def events_path_of(cluster_file: str | os.PathLike) -> Path:
    """Where a cluster's events log lives: beside its cluster file (its data dir)."""
    return Path(cluster_file).resolve().parent / FILE_NAME


class EventTail:
    """The newest events of a log as it grows, read incrementally (a console polls it each
    second: only what was appended since is read), across a roll."""

    def __init__(self, path: str | os.PathLike, keep: int = 500) -> None:
        self.path = live_file(path)
        self.recent: collections.deque[dict] = collections.deque(maxlen=keep)
        self._ino: int | None = None
        self._pos = 0

    def poll(self) -> bool:
        """Read what was appended; True when something was."""
        try:
            ino = os.stat(self.path).st_ino
        except FileNotFoundError:
            return False
        before = len(self.recent), self.recent[-1] if self.recent else None
        if ino != self._ino:
            if self._ino is not None:  # rolled (maybe more than once) since the last poll
                self._catch_up_rolled()
            self._ino, self._pos = ino, 0
        self._read(self.path)
        return (len(self.recent), self.recent[-1] if self.recent else None) != before

    def _catch_up_rolled(self) -> None:
        """The rest of the file we were reading, now rolled to .N, then the newer rolled
        files whole, oldest first."""
        rolled = log_files(self.path)[:-1]  # oldest first, without the live file
        for i, file in enumerate(rolled):
            with contextlib.suppress(OSError):
                if os.stat(file).st_ino == self._ino:
                    self._read(file)
                    for newer in rolled[i + 1:]:
                        self._pos = 0
                        self._read(newer)
                    return

    def _read(self, file: Path) -> None:
        with open(file, "rb") as f:
            f.seek(self._pos)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1  # a line still being written waits for its newline
        self._pos += end
        for raw in chunk[:end].splitlines():
            if (doc := _parse(raw)) is not None:
                self.recent.append(doc)
