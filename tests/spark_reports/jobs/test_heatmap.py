"""The heatmap job end to end on a small generated log with bad rows mixed in,
cross-checked against pyarrow + heatmap.LatencyHistogram on the same Parquet."""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from datetime import UTC, date, datetime

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from heatmap import SLA_MAX_S, LatencyHistogram
from heatmap.metrics_log import histogram_from_row
from spark_reports import schema
from spark_reports.errors import EmptyInput, SchemaMismatch
from spark_reports.generator import Double11Config, generate_double11
from spark_reports.jobs.heatmap import HeatmapOptions, run_heatmap
from tests.report_rows import differences, rows
from tests.spark_reports import browser
from tests.spark_reports.browser import CHROMIUM

START = datetime(2026, 11, 10, 23, 58, tzinfo=UTC)
WINDOW_S = 60


def bad_rows() -> pa.Table:
    good = dict(
        ts=datetime(2026, 11, 11, 0, 1, tzinfo=UTC), cluster="double11", broker="broker-001",
        op="send", count=2, sum_us=100, min_us=40, max_us=60, buckets=[(-115, 2)], msgs=2, bytes=10,
    )  # fmt: skip
    rows = [
        {**good, "count": 3},  # count != sum(buckets)
        {**good, "op": "sendd"},
        {**good, "count": -2, "buckets": [(-115, -2)]},
        {**good, "ts": datetime(2026, 11, 10, 23, 59, tzinfo=UTC)},  # in the wrong date= partition
    ]
    return pa.Table.from_pylist(rows, schema=schema.LATENCY_SCHEMA)


@pytest.fixture(scope="module")
def job(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("heatmap_job")
    log, out = root / "log", root / "out"
    generate_double11(Double11Config(brokers=3, hours=0.1, start=START, seed=5), log)
    # The same bad rows in both tables: the job reads the minute rollups (1 min windows),
    # the reference below the seconds, and the quarantine rules hold for both.
    pq.write_table(bad_rows(), log / "latency" / "date=2026-11-11" / "part-bad.parquet")
    pq.write_table(bad_rows(), log / "latency_1m" / "date=2026-11-11" / "part-bad.parquet")
    summary = run_heatmap(
        HeatmapOptions(input=str(log), out=str(out), window_s=WINDOW_S), spark=spark
    )
    return log, out, summary


def fragments(log):
    dataset = ds.dataset(str(log / "latency"), format="parquet", partitioning="hive")
    for fragment in dataset.get_fragments():
        keys = ds.get_partition_keys(fragment.partition_expression)
        table = fragment.to_table()
        yield table, schema.quarantine_reasons(table, date.fromisoformat(str(keys["date"])))


def reference(log) -> dict[tuple, LatencyHistogram]:
    """(window epoch, broker or ALL, op) -> histogram merged by LatencyHistogram."""
    merged: dict[tuple, LatencyHistogram] = defaultdict(LatencyHistogram)
    for table, reasons in fragments(log):
        for r, reason in zip(table.to_pylist(), reasons, strict=True):
            if reason is not None:
                continue
            h = histogram_from_row(r)
            epoch = int(r["ts"].timestamp())
            w = epoch - epoch % WINDOW_S
            merged[(w, r["broker"], r["op"])].merge(h)
            merged[(w, "ALL", r["op"])].merge(h)
    return dict(merged)


def test_heatmap_counts_equal_merged_histograms(job):
    log, out, _ = job
    want = {
        (*key, bucket): count
        for key, h in reference(log).items()
        for bucket, count in h.buckets.items()
    }
    got = pq.read_table(out / "heatmap").to_pylist()
    got = {
        (int(r["window_start"].timestamp()), r["broker"], r["op"], r["bucket"]): r["count"]
        for r in got
    }
    assert got == want
    assert {k[1] for k in got} == {"ALL", "broker-000", "broker-001", "broker-002"}


def test_percentiles_equal_the_histogram_rule(job):
    log, out, _ = job
    ref = reference(log)
    rows = pq.read_table(out / "percentiles").to_pylist()
    assert len(rows) == len(ref)
    for r in rows:
        h = ref[(int(r["window_start"].timestamp()), r["broker"], r["op"])]
        assert r["count"] == h.count
        assert r["p50"] == h.quantile(0.5)
        assert r["p99"] == h.quantile(0.99)
        assert r["p999"] == h.quantile(0.999)
        assert r["max"] == h.max
        assert math.isclose(r["mean"], h.mean, rel_tol=1e-9)


def test_bad_rows_are_quarantined_with_their_reason_and_counted(job):
    log, out, summary = job
    expected = sum(int(np.sum(reasons != None)) for _, reasons in fragments(log))  # noqa: E711
    assert expected == 4
    assert summary["quarantined"] == 4
    q = pq.read_table(out / "quarantine").to_pylist()
    assert sorted(r["reason"] for r in q) == sorted(
        [schema.COUNT_MISMATCH, schema.UNKNOWN_OP, schema.NEGATIVE, schema.TIME_OUT_OF_RANGE]
    )
    html = (out / "report.html").read_text()
    assert "Quarantined rows (4)" in html and "unknown op" in html


def markup(page: str) -> str:
    """The page without the contents of its script elements (plotly.js names URLs)."""
    return re.sub(r"(<script[^>]*>).*?(</script>)", r"\1\2", page, flags=re.S)


def test_report_is_self_contained_and_outputs_were_moved_into_place(job):
    _, out, summary = job
    page = (out / "report.html").read_text()
    tags = markup(page)
    assert not re.search(r'(src|href)="(https?:|//)', tags)
    assert "<img" not in tags and "<link" not in tags
    scripts = re.findall(r"<script([^>]*)>", tags)
    assert scripts and not any("src=" in attrs for attrs in scripts)  # every script inline
    assert "Plotly.newPlot" in page and len(page) > 3_000_000  # plotly.js itself is in the file
    assert "Top 10 brokers by p99.9" in page and "Spikes" in page
    assert sorted(p.name for p in out.iterdir()) == [
        "heatmap",
        "percentiles",
        "quarantine",
        "report.html",
    ]
    assert summary["window_s"] == WINDOW_S and summary["report_op"] == "send"
    assert summary["table"] == schema.LATENCY_1M_TABLE  # whole minutes: the rollups serve


def test_embedded_data_is_the_heatmap_and_the_worst_spikes_second_by_second(job):
    from spark_reports.heatmap_report.interactive import DATA_ID

    log, out, summary = job
    page = (out / "report.html").read_text()
    blob = re.search(rf'<script type="application/json" id="{DATA_ID}">(.*?)</script>', page, re.S)
    data = json.loads(blob.group(1))
    cluster = next(h for h in data["heatmaps"] if h["name"] == "ALL")["cells"]
    got = {(data["t0"] + c * data["step"], data["lo"] + r): n
           for c, r, n in zip(cluster[::3], cluster[1::3], cluster[2::3], strict=True)}  # fmt: skip
    want = {
        (key[0], bucket): count
        for key, h in reference(log).items()
        if key[1] == "ALL" and key[2] == "send"
        for bucket, count in h.buckets.items()
    }
    assert got == want
    assert [s["name"] for s in data["sla"]] == ["3 ms average", "20 ms max"]
    # Drill-downs: 1-second cells of the spike windows, equal to the 1 s rows merged.
    assert data["drills"] and len(data["drills"]) == summary["drills"] == summary["spikes"]
    seconds = defaultdict(LatencyHistogram)
    for table, reasons in fragments(log):
        for r, reason in zip(table.to_pylist(), reasons, strict=True):
            if reason is None and r["op"] == "send":
                seconds[(r["broker"], int(r["ts"].timestamp()))].merge(histogram_from_row(r))
    for d in data["drills"]:
        cells = d["cells"]
        got = {(d["t0"] + c, data["lo"] + r): n
               for c, r, n in zip(cells[::3], cells[1::3], cells[2::3], strict=True)}  # fmt: skip
        want = {(t, b): n for (broker, t), h in seconds.items()
                if broker == d["broker"] and d["t0"] <= t < d["t0"] + WINDOW_S
                for b, n in h.buckets.items()}  # fmt: skip
        assert got == want and d["max_ms"] > 20


def test_verdict_names_the_worst_broker_window_like_the_reference(job):
    log, out, summary = job
    windows = [(k, h) for k, h in reference(log).items() if k[1] != "ALL" and k[2] == "send"]
    (w, broker, _), worst = max(windows, key=lambda kv: kv[1].max)
    v = summary["verdict"]
    assert (v["broker"], v["at"]) == (broker, datetime.fromtimestamp(w, UTC).isoformat())
    assert v["max_ms"] == round(worst.max * 1e3, 3)
    assert v["pass"] is (worst.max <= SLA_MAX_S)
    assert v["line"].startswith(f"{'PASS' if v['pass'] else 'FAIL'}: ")
    assert f"at {datetime.fromtimestamp(w, UTC):%Y-%m-%d %H:%M:%S} UTC ({WINDOW_S} s window)" in v[
        "line"
    ]
    html = (out / "report.html").read_text()
    first = re.search(r"</h1>\s*<p class=\"verdict (ok|bad)\">([^<]+)</p>", html)
    assert first and first.group(2) == v["line"].replace("'", "&#x27;")


def test_cli_prints_the_verdict_first_and_outputs_follow_the_umask(spark, job, tmp_path, capsys):
    import os
    import stat

    from console.cli import main

    log, _, summary = job

    def run(out, mask, *extra):
        saved = os.umask(mask)
        try:
            code = main(["report", "heatmap", "--input", str(log), "--out", str(tmp_path / out),
                         "--window", "1m", *extra])  # fmt: skip
        finally:
            os.umask(saved)
        root = tmp_path / out
        modes = {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*")}
        return code, capsys.readouterr(), stat.S_IMODE(root.stat().st_mode), modes

    code, io, root_mode, modes = run("text", 0o022)
    failed = summary["verdict"]["pass"] is False
    assert code == (1 if failed else 0) and io.err == ""  # the exit rule: 1 on FAIL, outputs written
    assert io.out.splitlines()[0] == summary["verdict"]["line"]
    assert root_mode == 0o755
    assert {m for p, m in modes.items() if (tmp_path / "text" / p).is_dir()} == {0o755}
    assert {m for p, m in modes.items() if (tmp_path / "text" / p).is_file()} == {0o644}

    code, io, root_mode, modes = run("private", 0o077, "--json", "--static")
    assert code == (1 if failed else 0) and json.loads(io.out)["verdict"] == summary["verdict"]
    static = (tmp_path / "private" / "report.html").read_text()
    images = re.findall(r'<img[^>]+src="([^"]+)"', static)
    assert len(images) >= 3 and all(i.startswith("data:image/png;base64,") for i in images)
    assert "<script" not in static  # the print/e-mail page: pictures only
    assert root_mode == 0o700
    assert {m for p, m in modes.items() if (tmp_path / "private" / p).is_dir()} == {0o700}
    assert {m for p, m in modes.items() if (tmp_path / "private" / p).is_file()} == {0o600}
    assert "report.html" in modes and "heatmap/_SUCCESS" in modes


def test_select_rows_filters_like_pyarrow(spark, job):
    from spark_reports.heatmap_report import frames as hf

    log, _, _ = job
    df = spark.read.parquet(str(log / "latency"))
    t0, t1 = (
        datetime(2026, 11, 10, 23, 59, 30, tzinfo=UTC),
        datetime(2026, 11, 11, 0, 2, tzinfo=UTC),
    )
    got = hf.select_rows(df, t0, t1, "double11", ["broker-002"], ["pull"]).count()
    table = pq.read_table(log / "latency")
    ts = table.column("ts").to_pylist()
    want = sum(
        1
        for t, b, o in zip(
            ts, table.column("broker").to_pylist(), table.column("op").to_pylist(), strict=True
        )
        if t0 <= t < t1 and b == "broker-002" and o == "pull"
    )
    assert got == want == 150


def test_schema_mismatch_names_the_column_and_exits_1(spark, tmp_path, capsys):
    from console.cli import main

    bad = schema.LATENCY_SCHEMA.set(4, pa.field("count", pa.string()))
    folder = tmp_path / "log" / "latency" / "date=2026-11-11"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([], schema=bad), folder / "part-0.parquet")
    with pytest.raises(SchemaMismatch, match="column 'count' has type string, expected bigint"):
        run_heatmap(
            HeatmapOptions(input=str(tmp_path / "log"), out=str(tmp_path / "out")), spark=spark
        )
    code = main(
        ["report", "heatmap", "--input", str(tmp_path / "log"), "--out", str(tmp_path / "out")]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert err == [
        "floodgate report: error: latency: column 'count' has type string, expected bigint"
    ]


def test_empty_input_is_a_clear_error(spark, tmp_path, job, capsys):
    from console.cli import main

    with pytest.raises(EmptyInput, match="no metrics log at"):
        run_heatmap(
            HeatmapOptions(input=str(tmp_path / "nothing"), out=str(tmp_path / "o")), spark=spark
        )
    log, _, _ = job
    later = HeatmapOptions(
        input=str(log), out=str(tmp_path / "o"), start=datetime(2026, 11, 12, tzinfo=UTC)
    )
    with pytest.raises(EmptyInput, match=r"no latency rows in .* \(from 2026-11-12T00:00:00Z\)"):
        run_heatmap(later, spark=spark)
    assert (
        main(
            [
                "report",
                "heatmap",
                "--input",
                str(tmp_path / "nothing"),
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2  # said before Spark starts (spark_reports.preflight): bad input, exit 2
    )
    assert "no such directory" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium: run scripts/setup.sh")
def test_headless_chromium_draws_the_report_and_hovers_a_cell(job):
    """The page loads offline with no console error, fetches nothing, and hovering
    the cluster heatmap's busiest cell shows its time, bucket and count."""
    from spark_reports.heatmap_report.interactive import DATA_ID, bucket_labels

    _, out, _ = job
    report = out / "report.html"
    data = json.loads(re.search(rf'id="{DATA_ID}">(.*?)</script>', report.read_text(), re.S)[1])
    cells = next(h for h in data["heatmaps"] if h["name"] == "ALL")["cells"]
    k = max(range(0, len(cells), 3), key=lambda i: cells[i + 2])
    col, row, count = cells[k : k + 3]

    async def check(page):
        await page.wait_for("document.querySelectorAll('.main-svg').length >= 6")  # every chart
        return {
            "drill": await page.eval("document.getElementById('fg-drill').data[0].type"),
            "hover": await hover(page, "fg-heatmap-0", col, row),
            "errors": page.errors(),
            "requests": page.requests(),
        }

    seen = browser.run(report, check)
    assert seen["errors"] == []
    assert {u.split(":", 1)[0] for u in seen["requests"]} <= {"file", "data"}
    assert seen["drill"] == "heatmap"
    when = datetime.fromtimestamp(data["t0"] + col * data["step"], UTC)
    assert f"{when:%Y-%m-%d %H:%M:%S} UTC" in seen["hover"]
    assert data["labels"][row] in seen["hover"] and f"{count:,} calls" in seen["hover"]
    assert data["labels"][row] == bucket_labels(data["lo"] + row, data["lo"] + row)[0]


async def hover(page, element_id: str, col: int, row: int) -> str:
    """Move the mouse over heatmap cell (col, row) of a chart; the hover label's text."""
    where = await page.eval(f"""(() => {{
        const gd = document.getElementById('{element_id}'); gd.scrollIntoView();
        const L = gd._fullLayout, box = gd.getBoundingClientRect(), t = gd.data[0];
        return [box.left + L._size.l + L.xaxis.d2p(t.x[{col}]),
                box.top + L._size.t + L.yaxis.d2p(t.y[{row}])];
    }})()""")  # fmt: skip
    await page.send("Input.dispatchMouseEvent", type="mouseMoved", x=where[0], y=where[1])
    return await page.wait_for(
        "Array.from(document.querySelectorAll('.hoverlayer .hovertext')).map(e => e.textContent).join(' ')"
    )


def test_the_driver_in_slices_of_brokers_gives_the_same_report(spark, job, tmp_path, monkeypatch):
    """The bounded-driver path (one broker a slice, the pass kept by a checkpoint) against
    the one-slice run of the same log: outputs row for row, the page's data float for float."""
    log, out, summary = job
    sliced = run_heatmap(HeatmapOptions(input=str(log), out=str(tmp_path / "sliced"),
                                        window_s=WINDOW_S, slice_rows=1), spark=spark)  # fmt: skip
    for s in (sliced, dict(summary)):
        s.pop("out"), s.pop("outputs")
    assert sliced == {k: v for k, v in summary.items() if k not in ("out", "outputs")}
    parts = sorted(p.name for p in (tmp_path / "sliced" / "heatmap").glob("part-*"))
    assert len(parts) == 4  # three brokers one by one (bad rows' broker among them), the cluster

    # floats to 1e-9 (tests/report_rows.py: the host's vector division, now and then)
    keys = ("window_start", "broker", "op")
    for name, k in (("heatmap", (*keys, "bucket")), ("percentiles", keys), ("quarantine", ("ts", "op", "count"))):
        assert not differences(rows(tmp_path / "sliced" / name, k), rows(out / name, k)), name

    def data(root):
        page = (root / "report.html").read_text()
        got = json.loads(re.search(r'id="floodgate-data">(.*?)</script>', page, re.S)[1])
        return got

    assert not differences(data(tmp_path / "sliced"), data(out))

    def page(root):  # the whole page but the time it was made
        return re.sub(r"generated [0-9-]+ [0-9:]+ UTC", "", (root / "report.html").read_text())

    assert page(tmp_path / "sliced") == page(out)
    # the writes a non-local --out (hdfs://, s3a://) takes: Spark's, slice by slice
    from spark_reports import output

    monkeypatch.setattr(output, "FORCE_SPARK_WRITES", True)
    run_heatmap(HeatmapOptions(input=str(log), out=str(tmp_path / "spark"), window_s=WINDOW_S,
                               slice_rows=1, static=True), spark=spark)  # fmt: skip
    for name, k in (("heatmap", (*keys, "bucket")), ("percentiles", keys)):
        assert not differences(rows(tmp_path / "spark" / name, k), rows(out / name, k)), name
