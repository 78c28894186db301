"""The docs build strict (`make docs`): a broken link, a missing anchor or a page left out
of the nav fails the suite. The pages made at build time (scripts/docs_hooks.py) are there
and say what the code says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _build(out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
         "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)


def test_mkdocs_build_strict(tmp_path):
    site = tmp_path / "site"
    done = _build(site)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    for page in ("index.html", "getting-started/index.html", "architecture/index.html",
                 "references/index.html", "guide/during-the-night/index.html"):
        assert (site / page).is_file(), page

    # generated from the parsers: every command, with its options
    commands = (site / "reference/commands/index.html").read_text(encoding="utf-8")
    for command in ("floodgate demo", "floodgate tune plan", "floodgate acl user add",
                    "floodgate incident export", "floodgate report heatmap"):
        assert f">{command}<" in commands, command
    assert "--target-date" in commands
    # included, not copied: the protocol beside its code, the figures where bench/ writes them
    protocol = (site / "reference/protocol/index.html").read_text(encoding="utf-8")
    assert "broker_core/PROTOCOL.md" in protocol and "0xF10D" in protocol
    bench = (site / "benchmarks/index.html").read_text(encoding="utf-8")
    assert "bench/README.md" in bench
    # the structure drawing, made from the code
    architecture = (site / "architecture/index.html").read_text(encoding="utf-8")
    assert "<!-- structure -->" not in architecture
    assert "broker_core" in architecture and "spark_reports" in architecture


def test_readme_is_the_first_screen():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    for target in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / target).is_file(), f"README links to {target}, which is not there"


def test_sources_cited_by_title():
    """The source talks are cited by their names (docs/references.md), never by number."""
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for path in texts:
        hit = re.search(r"(?<![-\w])seeds? \d", path.read_text(encoding="utf-8"), re.I)
        assert hit is None, f"{path.relative_to(ROOT)}: {hit.group(0)!r}"
