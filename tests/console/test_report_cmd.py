"""`floodgate report heatmap`: bad usage is exit 2 and one line, before Spark starts."""

from __future__ import annotations

import pytest

from console.cli import main


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--window", "5x"], "--window: expected a duration"),
        (
            ["--from", "2026-11-11T01:00Z", "--to", "2026-11-11T00:00Z"],
            "--from must be before --to",
        ),
        (["--op", "sned"], "--op: unknown op sned"),
        (["--from", "yesterday"], "--from: not an ISO 8601 time"),
    ],
)
def test_report_heatmap_bad_usage(tmp_path, capsys, extra, message):
    code = main(
        ["report", "heatmap", "--input", str(tmp_path), "--out", str(tmp_path / "o"), *extra]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_report_lists_heatmap(capsys):
    assert main(["report"]) == 2
    assert "heatmap" in capsys.readouterr().out
