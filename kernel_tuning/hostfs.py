"""All host I/O goes through HostFS, rooted at a directory that stands for `/`.

Plugins name paths relative to the root ("proc/sys/vm/swappiness"), so the
same code runs against the live kernel (root "/") and against fake trees that
tests build. Two kinds of writes: kernel knobs (a plain write into an existing
/proc or /sys file, as `echo v > file` does) and config files (temp file,
fsync, atomic rename).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from kernel_tuning.errors import HostError

# Kernel knobs are tiny; a cap keeps a stray device file from being read forever.
MAX_KNOB_BYTES = 65536


class HostFS:
    def __init__(self, root: str | os.PathLike = "/"):
        self.root = Path(root)
        if not self.root.is_dir():
            raise HostError(f"root {self.root} is not a directory")

    def path(self, rel: str) -> Path:
        rel = rel.lstrip("/")
        if ".." in Path(rel).parts:
            raise HostError(f"path {rel!r} leaves the root")
        return self.root / rel

    def shown(self, rel: str) -> str:
        """The path as a person should see it (absolute on the live host)."""
        return str(self.path(rel))

    def exists(self, rel: str) -> bool:
        return self.path(rel).exists()

    def read(self, rel: str) -> str | None:
        """The file's text, or None when it does not exist."""
        try:
            with open(self.path(rel), "rb") as f:
                data = f.read(MAX_KNOB_BYTES)
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise HostError(f"{self.shown(rel)} is a directory, not a file") from None
        except OSError as exc:
            raise HostError(f"cannot read {self.shown(rel)}: {exc.strerror or exc}") from None
        return data.decode("utf-8", errors="replace")

    def listdir(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(rel)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def writable(self, rel: str) -> bool:
        """Whether a write to rel could succeed (before trying it).

        A file with no write bit counts as read-only even for root: that is
        how the kernel treats read-only sysctls, and it lets tests running as
        root model them with chmod 0444.
        """
        p = self.path(rel)
        if p.exists():
            try:
                mode = p.stat().st_mode
            except OSError:
                return False
            return bool(mode & 0o222) and os.access(p, os.W_OK)
        parent = p.parent
        while not parent.exists():
            parent = parent.parent
        return os.access(parent, os.W_OK | os.X_OK)

    def mount_read_only(self, rel: str) -> bool:
        """True when rel sits on a read-only mount (e.g. /proc/sys in a container)."""
        p = self.path(rel)
        while not p.exists() and p != p.parent:
            p = p.parent
        try:
            return bool(os.statvfs(p).f_flag & os.ST_RDONLY)
        except OSError:
            return False

    def write_knob(self, rel: str, value: str) -> None:
        p = self.path(rel)
        if not p.exists():
            raise HostError(f"{self.shown(rel)} does not exist")
        data = value if value.endswith("\n") else value + "\n"
        try:
            # No O_CREAT: a knob that vanished must fail, not appear as a file.
            fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, data.encode())
            finally:
                os.close(fd)
        except OSError as exc:
            raise HostError(
                f"cannot write {value.strip()!r} to {self.shown(rel)}: {exc.strerror or exc}"
            ) from None

    def write_file(self, rel: str, text: str, mode: int = 0o644) -> None:
        """Write a config file atomically (temp file, fsync, rename, fsync dir)."""
        try:
            atomic_write(self.path(rel), text, mode)
        except OSError as exc:
            raise HostError(f"cannot write {self.shown(rel)}: {exc.strerror or exc}") from None

    def remove(self, rel: str) -> None:
        p = self.path(rel)
        try:
            p.unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise HostError(f"cannot remove {self.shown(rel)}: {exc.strerror or exc}") from None
        fsync_dir(p.parent)

    def missing_ancestor(self, rel: str) -> str | None:
        """The highest directory of rel that does not exist yet (relative), if any."""
        p = Path(rel.lstrip("/")).parent
        top = None
        while str(p) not in ("", "."):
            if self.path(str(p)).exists():
                break
            top = str(p)
            p = p.parent
        return top

    def remove_empty_dirs(self, rel_file: str, up_to: str) -> None:
        """Remove rel_file's now-empty parent dirs, stopping above up_to."""
        p = self.path(rel_file).parent
        stop = self.path(up_to).parent
        while p != stop and p.is_dir() and not any(p.iterdir()):
            p.rmdir()
            p = p.parent


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, text: str, mode: int = 0o644) -> None:
    """Temp file in the same dir, fsync, rename over path, fsync the dir.

    broker_core.fsutil.atomic_write does the same for the broker; kernel_tuning imports
    no other package (the design's arrows), and it makes missing parents (a fake root)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
