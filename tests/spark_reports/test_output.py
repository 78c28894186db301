"""Report files honour the umask: 0666/0777 minus it, whoever writes them."""

from __future__ import annotations

import os
import stat

import pytest

from spark_reports.output import apply_umask, current_umask, write_atomic


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask():
    """Set the process umask for one test and restore it."""
    saved = os.umask(0o022)
    yield os.umask
    os.umask(saved)


@pytest.mark.parametrize(("mask", "want"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_write_atomic_creates_files_as_open_would(tmp_path, umask, mask, want):
    umask(mask)
    assert current_umask() == mask
    write_atomic(tmp_path / "capacity.json", b"{}\n")
    assert (tmp_path / "capacity.json").read_bytes() == b"{}\n"
    assert mode(tmp_path / "capacity.json") == want
    assert [p.name for p in tmp_path.iterdir()] == ["capacity.json"]  # no temp file left


def test_write_atomic_replaces_and_leaves_no_temp_file_on_failure(tmp_path, umask):
    target = tmp_path / "report.html"
    write_atomic(target, b"old")
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    with pytest.raises(TypeError):
        write_atomic(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_apply_umask_sets_files_and_folders(tmp_path, umask):
    umask(0o022)
    (tmp_path / "heatmap" / "sub").mkdir(parents=True)
    (tmp_path / "heatmap" / "part-0.parquet").write_bytes(b"x")
    (tmp_path / "heatmap" / "sub" / "_SUCCESS").write_bytes(b"")
    apply_umask(tmp_path / "heatmap", 0o077)
    assert mode(tmp_path / "heatmap") == 0o700
    assert mode(tmp_path / "heatmap" / "sub") == 0o700
    assert mode(tmp_path / "heatmap" / "part-0.parquet") == 0o600
    assert mode(tmp_path / "heatmap" / "sub" / "_SUCCESS") == 0o600
    (tmp_path / "report.html").write_bytes(b"x")
    os.chmod(tmp_path / "report.html", 0o600)
    apply_umask(tmp_path / "report.html", 0o022)
    assert mode(tmp_path / "report.html") == 0o644
