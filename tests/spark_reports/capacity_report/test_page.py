"""The capacity report page: self-contained, verdict first, rendered by headless Chromium."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import date, datetime, timedelta

import numpy as np
import pytest

from capacity.figures import significant
from capacity.forecast import read_history
from capacity.usl import usl_throughput
from heatmap import LatencyHistogram
from spark_reports.capacity_report.page import render
from spark_reports.capacity_report.plan import Options, build_plan
from tests.spark_reports import browser
from tests.spark_reports.browser import CHROMIUM


def _plan_and_minutes(**options):
    h = LatencyHistogram()
    h.record_many(np.random.default_rng(5).lognormal(np.log(0.001), 0.5, 2000))
    total = {"broker": "ALL", "count": h.count, "sum_us": round(h.sum * 1e6),
             "min_us": round(h.min * 1e6), "max_us": round(h.max * 1e6)}  # fmt: skip
    buckets = [{"broker": "ALL", "bucket": k, "count": c} for k, c in h.buckets.items()]
    measured = {
        "days": [{"day": date(2026, 11, 11), "peak_msgs_per_s": 800_000, "peak_ts": datetime(2026, 11, 11),
                  "total_msgs": 2e10, "total_bytes": 2e13, "seconds": 86_400, "coverage": 1.0,
                  "peak_to_mean": 3.5}],
        "brokers": [{"broker": "b<0>", "peak_msgs_per_s": 400_000, "utilisation": 0.8}],
        "latency_totals": [dict(total, broker="b<0>"), total],
        "latency_buckets": buckets + [dict(b, broker="b<0>") for b in buckets],
        "spikes": [{"broker": "b<0>", "spike_seconds": 4, "worst_max_us": 250_000}],
    }  # fmt: skip
    n = [1, 2, 4, 8, 16, 32, 64]
    points = (n, [float(usl_throughput(k, 0.03, 0.0004, 30_000.0)) for k in n])
    opts = Options(target_date=date(2027, 11, 11), history=read_history(), load_test=points,
                   **options)
    plan = build_plan(measured, opts)
    t0 = datetime(2026, 11, 10, 23, 0)
    minutes = [{"minute": t0 + timedelta(minutes=i), "peak_msgs_per_s": 1e5 * (1 + (i == 60) * 7),
                "mean_msgs_per_s": 8e4, "mean_us": 900.0, "max_us": 4000.0 + (i == 61) * 3e5}
               for i in range(120)]  # fmt: skip
    return plan, minutes, points


def test_static_page_is_self_contained_and_puts_the_verdict_first():
    plan, minutes, points = _plan_and_minutes()
    page = render(plan, minutes, load_test=points, static=True)
    assert page.count("data:image/png;base64,") == 3  # forecast, USL, traffic
    for external in ("http://", "https://", "<script", "<link"):
        assert external not in page
    order = ["Capacity plan for 2027-11-11", "Inputs and assumptions", "Forecast", "Scalability",
             "Measured traffic", "Sizing", "Brokers at risk", "Reliability", "What if", "Appendix"]  # fmt: skip
    positions = [page.index(h) for h in order[:1]] + [page.index(f"<h2>{h}") for h in order[1:]]
    assert positions == sorted(positions)
    assert "b&lt;0&gt;" in page and "b<0>" not in page  # broker names are escaped
    assert "4 s over 20 ms" in page
    assert "peak / mean" in page and "3.50" in page


@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium: run scripts/setup.sh")
def test_headless_chromium_renders_the_report_with_its_charts(tmp_path):
    import matplotlib.image as mpimg

    plan, minutes, points = _plan_and_minutes()
    page = tmp_path / "report.html"
    page.write_text(render(plan, minutes, load_test=points, static=True), encoding="utf-8")
    shot = tmp_path / "shot.png"
    subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--screenshot={shot}", "--window-size=1200,2600", page.as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    pixels = mpimg.imread(shot)[:, :, :3]
    assert pixels.shape[:2] == (2600, 1200)
    # the FAIL/PASS badge and the charts' blue lines show: the page and its PNGs were drawn
    blue = (pixels[:, :, 2] > 0.7) & (pixels[:, :, 0] < 0.3) & (pixels[:, :, 1] < 0.5)
    red = (pixels[:, :, 0] > 0.6) & (pixels[:, :, 1] < 0.3) & (pixels[:, :, 2] < 0.3)
    assert blue.sum() > 500 and red.sum() > 100


def test_interactive_page_carries_its_charts_and_no_external_reference():
    from spark_reports.capacity_report.interactive import DATA_ID

    plan, minutes, points = _plan_and_minutes()
    page = render(plan, minutes, load_test=points)
    markup = re.sub(r"(<script[^>]*>).*?(</script>)", r"\1\2", page, flags=re.S)
    assert "<img" not in markup and not re.search(r'(src|href)="(https?:|//)', markup)
    assert not any("src=" in a for a in re.findall(r"<script([^>]*)>", markup))
    figures = json.loads(re.search(rf'id="{DATA_ID}">(.*?)</script>', page, re.S)[1])
    assert sorted(figures) == ["fc-forecast", "fc-traffic-0", "fc-traffic-1", "fc-usl"]
    latency = figures["fc-traffic-1"]
    assert latency["data"][0]["y"][61] == 304.0  # the 300 ms stall in minute 61, in ms
    assert [a["text"] for a in latency["layout"]["annotations"]] == ["20 ms max", "3 ms average"]
    assert page.index("Capacity plan for 2027-11-11") < page.index("<h2>Forecast")


@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium: run scripts/setup.sh")
def test_headless_chromium_draws_the_interactive_charts_offline(tmp_path):
    plan, minutes, points = _plan_and_minutes()
    page = tmp_path / "report.html"
    page.write_text(render(plan, minutes, load_test=points), encoding="utf-8")

    async def check(p):
        drawn = await p.wait_for("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 8")
        return drawn, p.errors(), p.requests()

    drawn, errors, requests = browser.run(page, check)
    assert drawn and errors == []
    assert {u.split(":", 1)[0] for u in requests} <= {"file", "data"}


def test_measured_failover_from_drills_sets_the_mttr_the_page_shows(tmp_path):
    import argparse

    from spark_reports.errors import ReportError
    from spark_reports.jobs.capacity import add_arguments, measured_recovery

    drills = tmp_path / "drills.json"
    drills.write_text('{"drills": [{"failover_s": 0.8, "lost": 0},'
                      ' {"failover_s": 1.2, "lost": 0}, {"failover_s": 0.9, "lost": 0}]}')
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--input", "x", "--out", "y", "--target-date", "2027-11-11",
                              "--from-drill", str(drills)])
    measured = measured_recovery(args)
    assert (measured.mttr_s, measured.drills) == (0.9, 3)
    plan, minutes, points = _plan_and_minutes(mttr_s=measured.mttr_s, drills=measured.to_dict())
    a = plan["availability"]
    assert a["mttr_s"] == 0.9 and a["measured"]["failover_s"] == [0.8, 1.2, 0.9]
    assert a["availability"] == pytest.approx(86_399 / 86_399.9)
    page = render(plan, minutes, load_test=points, static=True)
    assert "2 copies of each message" in page
    assert "MTTR 0.9 s (measured: median failover of 3 drill(s), 0 acknowledged" in page
    default, *_ = _plan_and_minutes()
    assert "MTTR 1 s (the Double-11 talk's assumption)" in render(default, minutes, static=True)
    drills.write_text('{"failover_s": null}')
    with pytest.raises(ReportError, match="never saw its group recover"):
        measured_recovery(args)


def test_figures_on_the_page_carry_the_precision_they_have():
    plan, minutes, points = _plan_and_minutes()
    page = render(plan, minutes, load_test=points)
    assert "99.272658028199" not in page and ">99.27 %<" in page  # the 12 decimals
    assert ">99.999990 %<" in page  # two replicas (4 TB disks): the loss, 1.0e-7, to 2 figures
    assert "Availability with MTBF 86,399 s and MTTR 1 s" in page and "99.9988 %" in page
    fp = plan["verdict"]["forecast_peak_msgs_per_s"]
    assert f"high <b>{significant(fp['high'])}</b> msgs/s" in page  # a forecast: 3 figures
    # the SLA is the cluster's own forecast peak unless given; said where it comes from
    assert "rate: the cluster&#x27;s forecast peak, mid; latency: the Double-11 talk" in page
    text = json.dumps(plan)
    assert not re.search(r"\d\.\d*(0000000\d|9999999\d)\b", text)  # no binary noise in the JSON


def test_drills_of_two_modes_are_compared_on_the_page(tmp_path):
    import argparse
    import json

    from spark_reports.jobs.capacity import add_arguments, measured_modes, measured_recovery

    files = []
    for mode, times in (("controller", (0.1, 0.12)), ("raft", (0.8, 0.9))):
        f = tmp_path / f"{mode}.json"
        f.write_text(json.dumps([{"failover_s": s, "lost": 0, "consensus": mode}
                                 for s in times]))
        files += ["--from-drill", str(f)]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--input", "x", "--out", "y", "--target-date", "2027-11-11",
                              *files])
    modes, measured = measured_modes(args), measured_recovery(args)
    assert measured.mttr_s == pytest.approx(0.11)  # the plan counts on the fastest
    plan, minutes, points = _plan_and_minutes(mttr_s=measured.mttr_s, drills=measured.to_dict(),
                                              modes=modes)
    a = plan["availability"]
    assert [m["mode"] for m in a["modes"]] == ["controller", "raft"]
    assert a["needs"].startswith("every mode measured meets 99.999 %; controller")
    page = render(plan, minutes, load_test=points, static=True)
    assert "MTTR s (median)" in page and "every mode measured meets 99.999 %" in page
    single, *_ = _plan_and_minutes(mttr_s=0.9, drills=measured.to_dict())
    assert "modes" not in single["availability"]
