"""`floodgate capacity backlog` on a loop device of its own (root): each scheduler set
through `floodgate tune`, read back from the kernel while measured, and the disk's own
restored after; without root, refused in words."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import main

pytestmark = pytest.mark.timeout(300)
ROOT_TOOLS = all(shutil.which(t) for t in ("losetup", "mkfs.ext4", "mount", "umount"))


@pytest.fixture
def loop_disk(tmp_path):
    """An ext4 file system on a loop device: (its mount point, the device's name)."""
    img, mnt = tmp_path / "disk.img", tmp_path / "mnt"
    with img.open("wb") as fh:
        fh.truncate(768 << 20)
    dev = subprocess.run(["losetup", "--find", "--show", str(img)], check=True,
                         capture_output=True, text=True).stdout.strip()
    try:
        subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
        mnt.mkdir()
        subprocess.run(["mount", dev, str(mnt)], check=True)
        try:
            yield mnt, Path(dev).name
        finally:
            subprocess.run(["umount", str(mnt)], check=False)
    finally:
        subprocess.run(["losetup", "--detach", dev], check=False)


def scheduler_of(device: str) -> str:
    text = Path(f"/sys/block/{device}/queue/scheduler").read_text().split()
    return next(s.strip("[]") for s in text if s.startswith("["))


@pytest.mark.skipif(os.geteuid() != 0 or not ROOT_TOOLS, reason="needs root and a loop device")
def test_each_scheduler_applied_measured_and_rolled_back(loop_disk, tmp_path, capsys):
    mnt, device = loop_disk
    before = scheduler_of(device)
    state = tmp_path / "scheduler-measured.json"
    argv = ["capacity", "backlog", "--data", str(mnt / "store"), "--backlog-gib", "0.02",
            "--seconds", "2", "--schedulers", "mq-deadline,none", "--queues", "8",
            "--size", "4k", "--consumers", "1", "--inflight", "2", "--out",
            str(tmp_path / "out"), "--state-file", str(state), "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["device"] == device and doc["scheduler_before"] == before
    assert doc["fill"]["messages"] == int(0.02 * (1 << 30) / 4096) and not doc["fill"]["errors"]
    assert [(r["scheduler"], r["in_use"]) for r in doc["runs"]] == [
        ("mq-deadline", "mq-deadline"), ("none", "none")]
    for r in doc["runs"]:
        assert r["sent"] > 0 and r["errors"] == 0 and r["send_p99_ms"] > 0
        assert r["consume_tps"] > 0  # the consumers read the backlog
    assert scheduler_of(device) == before  # rolled back
    assert doc["best"] in {"mq-deadline", "none"}
    kept = json.loads(state.read_text())[device]
    assert [r["scheduler"] for r in kept["runs"]] == ["mq-deadline", "none"]
    assert json.loads((tmp_path / "out" / "backlog.json").read_text())["runs"] == doc["runs"]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root to drop to another user")
def test_without_root_it_is_refused_in_words(tmp_path):
    tmp_path.chmod(0o777)
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        sys.executable, "-m", "console.cli", "capacity", "backlog",
                        "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, cwd=str(tmp_path),
                       env={**os.environ, "HOME": str(tmp_path)})
    assert p.returncode != 0
    assert "run it as root" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
