"""Writing report outputs so that readers never see half a file, with the
modes the user's umask asks for.

`StagedOutput`: job outputs staged under OUT/_tmp-<id>/ and renamed into place
at the end, through Hadoop's FileSystem API (via the session's JVM), so OUT
may be any URI Spark writes: a local path, file://, hdfs://, s3a://. A failed
run leaves the previous outputs untouched; Spark readers skip names starting
with "_". `write_atomic`: one local file by a temp file and a rename.

Modes: Hadoop's local file system applies its own `fs.permissions.umask-mode`
(022 unless configured), not the process umask, and Python's mkstemp creates
0600; both are brought to 0666/0777 minus the process umask for local outputs.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def current_umask() -> int:
    """The process umask, read without changing it where Linux allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore (not thread-safe, hence last)
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, data: bytes) -> None:
    """Write a local file by a temp file in the same directory and a rename.

    os.open with 0o666 lets the kernel apply the umask, as `open()` would
    (tempfile.mkstemp would make it 0600 whatever the umask). Not broker_core's
    fsutil.atomic_write: spark_reports may not import broker_core, and a report
    follows the user's umask where a broker's state has a fixed mode.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def apply_umask(root: str | Path, umask: int | None = None) -> None:
    """Files under `root` (and root) to 0666 & ~umask, directories to 0777 & ~umask."""
    umask = current_umask() if umask is None else umask
    file_mode, dir_mode = 0o666 & ~umask, 0o777 & ~umask
    root = Path(root)
    if not root.is_dir():
        os.chmod(root, file_mode)
        return
    os.chmod(root, dir_mode)
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            os.chmod(os.path.join(folder, name), dir_mode)
        for name in files:
            os.chmod(os.path.join(folder, name), file_mode)


class StagedOutput:
    def __init__(self, spark, out: str) -> None:
        jvm = spark._jvm
        self._path = jvm.org.apache.hadoop.fs.Path
        self.root = out.rstrip("/") or "/"
        self.fs = self._path(self.root).getFileSystem(spark._jsc.hadoopConfiguration())
        self.local = self.fs.getScheme() == "file"
        if self.local:
            self.fs.setWriteChecksum(False)  # no .report.html.crc beside the report
        self.staging = f"{self.root}/_tmp-{uuid.uuid4().hex[:12]}"
        if self.local:
            # os.makedirs honours the umask for OUT and the staging folder; with
            # 077 nothing under staging is reachable by others while it is written.
            os.makedirs(self._local(self.staging), exist_ok=True)
        else:
            self.fs.mkdirs(self._path(self.staging))

    def _local(self, path: str) -> str:
        return str(self.fs.pathToFile(self._path(path)).getPath())

    def path(self, name: str) -> str:
        """Where to write output `name` while the job runs."""
        return f"{self.staging}/{name}"

    def write_bytes(self, name: str, data: bytes) -> None:
        if self.local:
            write_atomic(self._local(self.path(name)), data)
            return
        stream = self.fs.create(self._path(self.path(name)), True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def promote(self, names: list[str]) -> None:
        """Replace OUT/<name> by the staged one, for each name; then drop staging."""
        if self.local:
            umask = current_umask()
            for name in names:
                apply_umask(self._local(self.path(name)), umask)
        for name in names:
            final = self._path(f"{self.root}/{name}")
            if self.fs.exists(final):
                self.fs.delete(final, True)
            if not self.fs.rename(self._path(self.path(name)), final):
                raise OSError(f"could not move {self.path(name)} to {self.root}/{name}")
        self.discard()

    def discard(self) -> None:
        self.fs.delete(self._path(self.staging), True)


def exists(spark, path: str) -> bool:
    jpath = spark._jvm.org.apache.hadoop.fs.Path(path)
    return bool(jpath.getFileSystem(spark._jsc.hadoopConfiguration()).exists(jpath))
