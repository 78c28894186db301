"""The report kit both HTML pages are made of: tables, images, figures, the page."""

from __future__ import annotations

import base64

from spark_reports import report_kit as kit


def test_tables_escape_and_align_numbers_right_text_left():
    html = kit.table(
        [{"broker": "<b>", "calls": 1234567, "p99": kit.Num("3.10 ms"), "note": None}],
        [("broker", lambda r: r["broker"]), ("calls", lambda r: r["calls"]),
         ("p99", lambda r: r["p99"]), ("note", lambda r: r["note"])],
    )  # fmt: skip
    assert "&lt;b&gt;" in html and "<b>" not in html
    assert "<th>broker</th><th>calls</th><th>p99</th><th>note</th>" in html
    assert "<td class=t>&lt;b&gt;</td><td>1,234,567</td><td>3.10 ms</td><td class=t></td>" in html


def test_figure_to_embedded_png_and_the_page_around_it():
    with kit.figure(2, 1) as (fig, ax):
        ax.plot([0, 1], [1, 0])
        png = kit.figure_png(fig, dpi=50)
    assert png.startswith(b"\x89PNG")
    tag = kit.img(png, 'a "chart"')
    assert tag.startswith('<img alt="a &quot;chart&quot;" src="data:image/png;base64,')
    assert base64.b64decode(tag.split(",", 1)[1].rstrip('">')) == png
    page = kit.page("t<1>", "body{color:red}", ["<h1>x</h1>", tag])
    assert page.startswith("<!doctype html><html lang=en><head><meta charset=utf-8>")
    assert "<title>t&lt;1&gt;</title>" in page and "body{color:red}" in page
    assert page.index("<h1>x</h1>") < page.index("<img") < page.index("</body></html>")
    for external in ("http://", "https://", "<script", "<link"):
        assert external not in page


def test_a_figure_is_closed_even_when_drawing_fails():
    import matplotlib.pyplot as plt

    before = len(plt.get_fignums())
    try:
        with kit.figure(2, 1):
            raise RuntimeError("drawing failed")
    except RuntimeError:
        pass
    assert len(plt.get_fignums()) == before


def test_log_axis_ticks_say_their_value_and_unit():
    from spark_reports.report_kit import log_axis_ms

    axis = log_axis_ms([0.4, 3.0, 25.0, None, float("nan")])
    labels = dict(zip(axis["tickvals"], axis["ticktext"], strict=True))
    assert axis["type"] == "log" and labels[20.0] == "20 ms" and labels[0.5] == "0.5 ms"
    assert labels[1.0] == "1 ms" and min(labels) <= 0.4 and max(labels) >= 25
    wide = log_axis_ms([0.05, 1500.0])
    assert "1 s" in wide["ticktext"] and len(wide["tickvals"]) <= 14
