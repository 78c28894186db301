"""`floodgate capacity measure` on a real broker: one small cell, two steps, every
output written and read back; and bad input refused in words."""

from __future__ import annotations

import csv
import json

import pytest

from console.cli import main

pytestmark = pytest.mark.timeout(180)


def test_one_cell_two_steps_against_a_running_broker(cluster_factory, tmp_path, capsys):
    c = cluster_factory(n=1, flush="sync")
    out = tmp_path / "measured"
    argv = ["capacity", "measure", "--cluster", str(c.path), "--flush", "async,sync",
            "--sizes", "128", "--queues", "8", "--step-s", "2", "--max-concurrency", "2",
            "--sla-ms", "60000",  # the steps' mechanics, not this busy host's latency
            "--out", str(out), "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    [cell] = doc["cells"]
    assert (cell["flush"], cell["size"], cell["queues"]) == ("sync", 128, 8)
    assert [s["concurrency"] for s in cell["steps"]] == [1, 2]
    assert cell["stopped"] == "the concurrency cap (2) reached"
    for s in cell["steps"]:
        assert s["sent"] > 0 and s["errors"] == 0 and s["send_tps"] > 0
        assert 0 < s["avg_ms"] <= s["p99_ms"] <= s["max_ms"]
        assert s["cpu_us_per_msg"] > 0 and s["peak_rss_mib"] > 0
        # the producer's count and the broker's agree
        assert s["stored_tps"] == pytest.approx(s["send_tps"], rel=0.02)
    assert sum(s["sub_tps"] for s in cell["steps"]) > 0  # the subscriber read them
    assert cell["knee"]["send_tps"] == max(s["send_tps"] for s in cell["steps"])
    # the broker flushes sync: the async cell is said to be skipped, not measured
    assert doc["skipped"] == [{"label": "async 128 B x 8",
                               "why": f"{c.file.brokers[0].name} flushes sync"}]
    assert "metaq2" not in cell  # the talk published no 8-queue cell

    assert json.loads((out / "cells.json").read_text())["cells"][0]["knee"] == cell["knee"]
    with (out / "steps.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["concurrency"]) for r in rows] == [1, 2]
    points = (out / "load-test" / "sync-128b-8q.csv").read_text().splitlines()
    assert points[0] == "concurrency,throughput" and len(points) == 3
    page = (out / "capacity-measure.html").read_text()
    assert "sync 128 B x 8" in page and "async 128 B x 8: not measured" in page


@pytest.mark.parametrize("argv,words", [
    (["--sizes", "big"], "argument --sizes: 'big': want a comma-separated list"),
    (["--flush", "fast"], "flush mode 'fast': want async or sync"),
    (["--cluster", "/nonexistent/cluster.toml"], "/nonexistent/cluster.toml"),
])
def test_bad_input_is_refused_in_one_line(argv, words, tmp_path, capsys):
    try:
        code = main(["capacity", "measure", "--out", str(tmp_path / "o"), *argv])
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert words in err and len(err.splitlines()) <= 3, err


def test_ctrl_c_keeps_the_cells_done(cluster_factory, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    c = cluster_factory(n=1, flush="async")
    out = tmp_path / "measured"
    proc = subprocess.Popen(
        [sys.executable, "-m", "console.cli", "capacity", "measure", "--cluster", str(c.path),
         "--flush", "async", "--sizes", "128,256", "--queues", "4", "--step-s", "1",
         "--max-concurrency", "2", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cells = out / "cells.json"
    deadline = time.monotonic() + 120
    while not (cells.exists() and json.loads(cells.read_text())["cells"]):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no cell done in 120 s"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)  # the second cell is under way
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "stopped: 1 of 2 cells kept in" in err
    kept = json.loads(cells.read_text())["cells"]
    assert [k["label"] for k in kept] == ["async 128 B x 4"] and kept[0]["knee"]


def test_a_cell_past_a_topics_queue_limit_is_spread_over_topics():
    from capacity.metaq2 import Cell
    from console.measure.cell_run import topics_of

    assert topics_of(Cell("sync", 1024, 128)) == {"capacity-sync-128b-1024q": 1024}
    spread = topics_of(Cell("async", 10240, 512))
    assert len(spread) == 10 and set(spread.values()) == {1024}
    assert sorted(topics_of(Cell("async", 2050, 512)).values()) == [683, 683, 684]


def test_a_cells_knee_keeps_within_the_sla_it_was_measured_against():
    from capacity.metaq2 import Cell
    from capacity.ramp import Step
    from console.measure.cell_run import CellResult

    steps = [Step(1, 4.0, 400, 0, 100.0, 10.0, 30.0, 40.0),
             Step(2, 4.0, 800, 0, 200.0, 20.0, 45.0, 60.0)]
    cell = Cell("sync", 128, 8)
    assert CellResult(cell, steps).knee is None  # past the default 20 ms
    assert CellResult(cell, steps, sla_ms=40).knee.concurrency == 1
    assert CellResult(cell, steps, sla_ms=50).to_dict()["knee"]["concurrency"] == 2
