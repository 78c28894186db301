"""The bearer token of a broker's HTTP admin endpoints (/admin/...: topics, offsets,
quotas, write permission, faults), kept in a file readable by its owner only, as
credentials are (acl.credentials).

Without a token those endpoints answer loopback only, which on a shared host is anyone
with a shell. A cluster enforcing an ACL (`cluster up --acl`) makes one, gives its
brokers the file (`broker serve --admin-token-file`; a token on the command line would
show in the process list) and names it in the cluster file; commands with `--cluster`
then send it, as does every process whose FLOODGATE_ADMIN_TOKEN_FILE names it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from broker_core.acl.credentials import read_private

ENV = "FLOODGATE_ADMIN_TOKEN_FILE"


def load(path: str | os.PathLike) -> str:
    """ValueError (one line) when the file is missing, open to others, or empty."""
    token = read_private(path, "admin token").strip()
    if not token:
        raise ValueError(f"admin token {path}: empty")
    return token


def make(path: str | os.PathLike) -> Path:
    """A random token in a new file, mode 0600 from its creation (kept if it exists)."""
    p = Path(path)
    if not p.exists():
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
    return p


def default() -> str | None:
    """The token FLOODGATE_ADMIN_TOKEN_FILE names (None when unset)."""
    path = os.environ.get(ENV)
    return load(path) if path else None


def use(path: str | os.PathLike | None) -> None:
    """Every admin request this process makes sends the token `path` holds."""
    if path is None:
        return
    load(path)  # checked now: a bad file is one line at start, not at the first call
    os.environ[ENV] = str(path)
