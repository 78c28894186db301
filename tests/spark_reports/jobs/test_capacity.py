"""The capacity job end to end: capacity.json and the report from a small log."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil

import pytest


def test_job_writes_json_and_self_contained_html(spark, metrics_log, tmp_path):
    from capacity.usl import usl_throughput
    from spark_reports.jobs import capacity as job

    root, frame = metrics_log
    points = tmp_path / "sweep.csv"
    ns = (1, 2, 4, 8, 16, 32, 64)
    points.write_text("concurrency,throughput\n" + "\n".join(
        f"{n},{usl_throughput(n, 0.03, 0.0005, 400.0):.4f}" for n in ns) + "\n")  # fmt: skip
    parser = argparse.ArgumentParser()
    job.add_arguments(parser)
    out = tmp_path / "out"
    args = parser.parse_args([
        "--input", str(root), "--out", str(out), "--target-date", "2027-11-11",
        "--load-test", str(points), "--sla-rate", "20000",
    ])  # fmt: skip
    plan = job.run(args, spark=spark)
    saved = json.loads((out / "capacity.json").read_text())
    assert saved["verdict"] == plan["verdict"]
    v = saved["verdict"]
    measured_peak = frame[frame.op == "send"].groupby("ts").msgs.sum().max()
    assert saved["inputs"]["measured_peak_msgs_per_s"] == measured_peak
    assert v["forecast_peak_msgs_per_s"]["low"] <= v["forecast_peak_msgs_per_s"]["high"]
    assert saved["inputs"]["quarantined_rows"] == 1
    assert saved["usl"]["sigma"] == pytest.approx(0.03, rel=1e-3)
    risk = {r["broker"]: " ".join(r["reasons"]) for r in saved["at_risk"]}
    assert "3 s over 20 ms" in risk["b1"]
    checks = {c["check"]: c["pass"] for c in v["checks"]}
    assert checks["max send <= 20 ms"] is False  # the 350 ms stall
    html = (out / "report.html").read_text()
    if os.environ.get("FLOODGATE_KEEP_REPORT"):
        shutil.copytree(out, os.environ["FLOODGATE_KEEP_REPORT"], dirs_exist_ok=True)
    assert "Plotly.newPlot" in html and "floodgate-capacity-charts" in html  # interactive
    markup = re.sub(r"(<script[^>]*>).*?(</script>)", r"\1\2", html, flags=re.S)
    assert not re.search(r'(src|href)="(https?:|//)', markup)  # self-contained
    assert html.index("Capacity plan for 2027-11-11") < html.index("Inputs and assumptions")


def test_empty_input_is_a_clear_error(spark, tmp_path):
    from spark_reports.errors import ReportError
    from spark_reports.jobs import capacity as job

    parser = argparse.ArgumentParser()
    job.add_arguments(parser)
    args = parser.parse_args(["--input", str(tmp_path / "nothing"), "--out", str(tmp_path / "o"),
                              "--target-date", "2027-11-11"])  # fmt: skip
    with pytest.raises(ReportError, match="latency"):
        job.run(args, spark=spark)
