"""The apply journal: original values saved, fsynced, before any write.

One JSON file per apply in DIR/var/lib/floodgate/tuning/<id>.json. Entries
are in apply order and hold what each touched path held before (the knob's
text byte for byte, or a file's content, or null when it did not exist), so
a rollback, or the recovery of a crashed apply, restores them in reverse.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from kernel_tuning.errors import HostError, JournalError
from kernel_tuning.hostfs import atomic_write

JOURNAL_DIR = "var/lib/floodgate/tuning"
APPLYING, APPLIED, RESTORED, ROLLED_BACK = "applying", "applied", "failed-restored", "rolled-back"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass
class Entry:
    path: str  # relative to the root
    kind: str  # "knob" or "file"
    setting: str  # the setting that first touched it
    original: str | None  # exact prior content; None: the file did not exist
    restore: str | None  # what to write into a knob to restore it
    created_dir: str | None = None  # top dir the apply created, removed on restore
    applied: str | None = None  # what it held after the apply (to spot later changes)


@dataclass
class Journal:
    id: str
    profile: str
    root: str
    created: str
    status: str = APPLYING
    entries: list[Entry] = field(default_factory=list)
    error: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Journal:
        entries = [Entry(**e) for e in d.get("entries", [])]
        return cls(**{**d, "entries": entries})


def new_id(profile: str, directory: Path, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    base = f"{now:%Y%m%dT%H%M%SZ}-{profile}"
    candidate, n = base, 1
    while (directory / f"{candidate}.json").exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def save(journal: Journal, directory: Path) -> Path:
    """Write the journal atomically and durably (file and directory fsynced)."""
    path = directory / f"{journal.id}.json"
    try:
        atomic_write(path, json.dumps(journal.to_dict(), indent=1) + "\n", mode=0o600)
    except OSError as exc:
        raise JournalError(f"cannot write journal {path}: {exc.strerror or exc}") from None
    return path


def load(directory: Path, journal_id: str) -> Journal:
    if not _ID.match(journal_id):
        raise JournalError(f"bad journal id {journal_id!r}")
    path = directory / f"{journal_id}.json"
    try:
        return Journal.from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        known = ", ".join(j.id for j in list_journals(directory)[-5:]) or "none"
        raise JournalError(f"no journal {journal_id!r} in {directory} (latest: {known})") from None
    except (ValueError, TypeError) as exc:
        raise JournalError(f"journal {path} is corrupt: {exc}") from None


def list_journals(directory: Path) -> list[Journal]:
    """All journals, oldest first (ids start with a UTC timestamp)."""
    out = []
    for p in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            out.append(Journal.from_dict(json.loads(p.read_text())))
        except (ValueError, TypeError, OSError):
            continue
    out.sort(key=lambda j: (j.created, j.id))
    return out


def latest_restorable(directory: Path) -> Journal:
    for journal in reversed(list_journals(directory)):
        if journal.status in (APPLIED, APPLYING):
            return journal
    raise JournalError(f"nothing to roll back: no applied journal in {directory}")


def journal_dir(root: str | os.PathLike, state_dir: str | os.PathLike | None) -> Path:
    return Path(state_dir) if state_dir else Path(root) / JOURNAL_DIR


@contextmanager
def locked(directory: Path) -> Iterator[None]:
    """One apply or rollback at a time per journal dir (cron and a person, say)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise HostError(f"cannot use journal dir {directory}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise JournalError(
                f"another floodgate tune apply or rollback holds {directory / '.lock'}"
            ) from None
        yield
    finally:
        os.close(fd)
