"""A client's credentials: a small TOML file (`user = "..."`, `secret = "..."`), readable
by its owner only (as ssh keys: refused otherwise), named by `--credentials FILE` or
the FLOODGATE_CREDENTIALS environment variable. Every connection a client opens
authenticates with them (client.connection)."""

from __future__ import annotations

import os
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path

ENV = "FLOODGATE_CREDENTIALS"


@dataclass(frozen=True)
class Credentials:
    user: str
    secret: str

    def __repr__(self) -> str:  # never the secret in a log or a traceback
        return f"Credentials(user={self.user!r})"


def read_private(path: str | os.PathLike, what: str) -> str:
    """The text of a file readable by its owner only (as ssh keys); ValueError (one line,
    naming `what`) when it is missing or open to others."""
    p = Path(path)
    try:
        st = p.stat()
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ValueError(f"{what} {p}: readable by others "
                             f"({stat.filemode(st.st_mode)}): chmod 600 {p}")
        return p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{what} {p}: {exc.strerror or exc}") from None


def load(path: str | os.PathLike) -> Credentials:
    """ValueError (one line) when the file is missing, open to others, or malformed."""
    p = Path(path)
    try:
        doc = tomllib.loads(read_private(p, "credentials"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"credentials {p}: not TOML ({exc})") from None
    user, secret = doc.get("user"), doc.get("secret")
    if not isinstance(user, str) or not isinstance(secret, str) or not user or not secret:
        raise ValueError(f"credentials {p}: need user = \"...\" and secret = \"...\"")
    return Credentials(user, secret)


def write(path: str | os.PathLike, creds: Credentials) -> Path:
    """Write a credentials file, mode 0600 from its creation."""
    p = Path(path)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(f'user = "{creds.user}"\nsecret = "{creds.secret}"\n')
    os.chmod(p, 0o600)
    return p


_default: Credentials | None = None
_default_from: str | None = None


def default() -> Credentials | None:
    """The process's credentials from FLOODGATE_CREDENTIALS (None when unset), read once
    per value of the variable."""
    global _default, _default_from
    path = os.environ.get(ENV) or None
    if path != _default_from:
        _default, _default_from = (load(path) if path else None), path
    return _default


def use(path: str | os.PathLike | None) -> None:
    """`--credentials FILE`: every connection this process opens uses them."""
    if path is None:
        return
    load(path)  # checked now: a bad file is one line at start, not at the first call
    os.environ[ENV] = str(path)
