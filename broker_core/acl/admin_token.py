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
import stat
from pathlib import Path

ENV = "FLOODGATE_ADMIN_TOKEN_FILE"


def load(path: str | os.PathLike) -> str:
    """ValueError (one line) when the file is missing, open to others, or empty."""
    p = Path(path)
    try:
        st = p.stat()
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ValueError(f"admin token {p} is readable by others "
                             f"({stat.filemode(st.st_mode)}): chmod 600 {p}")
        token = p.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ValueError(f"admin token {p}: {exc.strerror or exc}") from None
    if not token:
        raise ValueError(f"admin token {p}: empty")
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
