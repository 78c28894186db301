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
import shutil
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


FORCE_SPARK_WRITES = False  # tests: the path a non-local --out takes, on a local one


class _HadoopFiles:
    """Files through the session's JVM (Hadoop's FileSystem): any URI Spark writes."""

    def __init__(self, spark, root: str) -> None:
        self._path = spark._jvm.org.apache.hadoop.fs.Path
        self.fs = self._path(root).getFileSystem(spark._jsc.hadoopConfiguration())
        if self.fs.getScheme() == "file":
            self.fs.setWriteChecksum(False)  # no .report.html.crc beside the report

    def local(self, path: str) -> str | None:
        """The local path, for a file: file system; None for any other."""
        if self.fs.getScheme() != "file":
            return None
        return str(self.fs.pathToFile(self._path(path)).getPath())

    def mkdirs(self, path: str) -> None:
        self.fs.mkdirs(self._path(path))

    def create(self, path: str, data: bytes) -> None:
        stream = self.fs.create(self._path(path), True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(self._path(path)))

    def delete(self, path: str) -> None:
        self.fs.delete(self._path(path), True)

    def rename(self, src: str, dst: str) -> bool:
        return bool(self.fs.rename(self._path(src), self._path(dst)))


class _LocalFiles:
    """Files on this host's file system: a Spark Connect client has no JVM (the
    server writes the tables at the same paths; spark_reports.connect)."""

    def local(self, path: str) -> str:
        return path

    def mkdirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def create(self, path: str, data: bytes) -> None:
        write_atomic(path, data)

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def delete(self, path: str) -> None:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.unlink(path)

    def rename(self, src: str, dst: str) -> bool:
        os.rename(src, dst)
        return True


class StagedOutput:
    def __init__(self, spark, out: str) -> None:
        from spark_reports.connect import local_only

        self.root = out.rstrip("/") or "/"
        if (local := local_only(spark, self.root, "--out")) is not None:
            self.root = local.rstrip("/") or "/"
            self.files = _LocalFiles()
        else:
            self.files = _HadoopFiles(spark, self.root)
        self.staging = f"{self.root}/_tmp-{uuid.uuid4().hex[:12]}"
        staging = self.files.local(self.staging)
        if staging is not None:
            # os.makedirs honours the umask for OUT and the staging folder; with
            # 077 nothing under staging is reachable by others while it is written.
            os.makedirs(staging, exist_ok=True)
        else:
            self.files.mkdirs(self.staging)

    def path(self, name: str) -> str:
        """Where to write output `name` while the job runs."""
        return f"{self.staging}/{name}"

    def write_bytes(self, name: str, data: bytes) -> None:
        local = self.files.local(self.path(name))
        if local is not None:
            write_atomic(local, data)
        else:
            self.files.create(self.path(name), data)

    def write_table(self, spark, name: str, table, part: int = 0) -> None:
        """Part ``part`` of the Parquet folder ``name`` from a driver-side Arrow table, laid
        out as Spark lays one out (part files, _SUCCESS): by pyarrow on a local file
        system (a Spark write of rows the driver holds costs an upload and a job), else
        through Spark."""
        local = self.files.local(self.path(name))
        if local is None or FORCE_SPARK_WRITES:
            mode = "append" if part else "errorifexists"
            spark.createDataFrame(table).write.mode(mode).parquet(self.path(name))
            return
        import pyarrow.parquet as pq

        os.makedirs(local, exist_ok=True)
        pq.write_table(table, os.path.join(local, f"part-{part:05d}.snappy.parquet"),
                       compression="snappy")  # fmt: skip
        if not os.path.exists(os.path.join(local, "_SUCCESS")):
            write_atomic(os.path.join(local, "_SUCCESS"), b"")

    def promote(self, names: list[str]) -> None:
        """Replace OUT/<name> by the staged one, for each name; then drop staging."""
        umask = current_umask()
        for name in names:
            local = self.files.local(self.path(name))
            if local is not None:
                apply_umask(local, umask)
        for name in names:
            final = f"{self.root}/{name}"
            if self.files.exists(final):
                self.files.delete(final)
            if not self.files.rename(self.path(name), final):
                raise OSError(f"could not move {self.path(name)} to {final}")
        self.discard()

    def discard(self) -> None:
        self.files.delete(self.staging)


def exists(spark, path: str) -> bool:
    from spark_reports.connect import local_only

    local = local_only(spark, path, "--input")
    if local is not None:
        return os.path.exists(local)
    jpath = spark._jvm.org.apache.hadoop.fs.Path(path)
    return bool(jpath.getFileSystem(spark._jsc.hadoopConfiguration()).exists(jpath))
