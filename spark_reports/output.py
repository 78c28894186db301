"""Job outputs staged under OUT/_tmp-<id>/ and renamed into place at the end.

Through Hadoop's FileSystem API (via the session's JVM), so OUT may be any
URI Spark writes: a local path, file://, hdfs://, s3a://. A failed run leaves
the previous outputs untouched; Spark readers skip names starting with "_".
"""

from __future__ import annotations

import uuid


class StagedOutput:
    def __init__(self, spark, out: str) -> None:
        jvm = spark._jvm
        self._path = jvm.org.apache.hadoop.fs.Path
        self.root = out.rstrip("/") or "/"
        self.fs = self._path(self.root).getFileSystem(spark._jsc.hadoopConfiguration())
        if self.fs.getScheme() == "file":
            self.fs.setWriteChecksum(False)  # no .report.html.crc beside the report
        self.staging = f"{self.root}/_tmp-{uuid.uuid4().hex[:12]}"
        self.fs.mkdirs(self._path(self.staging))

    def path(self, name: str) -> str:
        """Where to write output `name` while the job runs."""
        return f"{self.staging}/{name}"

    def write_bytes(self, name: str, data: bytes) -> None:
        stream = self.fs.create(self._path(self.path(name)), True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def promote(self, names: list[str]) -> None:
        """Replace OUT/<name> by the staged one, for each name; then drop staging."""
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
