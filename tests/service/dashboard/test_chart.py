"""The rate chart alone: points to SVG, no I/O."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from verifier.service.dashboard.chart import HEIGHT, MAX_SERIES, Point, Series, rate_chart

SVG = "{http://www.w3.org/2000/svg}"


def parse(points: list[Point]) -> ET.Element:
    return ET.fromstring(str(rate_chart(points, title="rates <by day>")))


def test_no_point_draws_axes_and_says_there_is_no_session() -> None:
    svg = parse([])
    assert svg.find(f"{SVG}polyline") is None
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    assert "no session in this range" in texts and "100 %" in texts and "0 %" in texts


def test_a_period_without_a_conclusive_session_breaks_the_line() -> None:
    points = [
        Point("d1", 1.0, 0.5, 2, 1),
        Point("d2", 0.5, 0.5, 2, 0),
        Point("d3", None, None, 1, 0),
        Point("d4", 1.0, 1.0, 1, 0),
        Point("d5", 1.0, 0.0, 1, 1),
    ]
    svg = parse(points)
    lines = svg.findall(f"{SVG}polyline")
    # Two runs of each rate: d1-d2 and d4-d5.
    assert sorted(line.get("class") or "" for line in lines) == [
        "line delivered",
        "line delivered",
        "line done",
        "line done",
    ]
    dots = [c for c in svg.iter(f"{SVG}circle") if c.get("class") == "dot delivered"]
    assert len(dots) == 4
    # A rate of 0 sits on the bottom line and 1 on the top one.
    ys = {float(c.get("cy") or 0) for c in dots}
    assert max(ys) > HEIGHT / 2 > min(ys)
    titles = [c.findtext(f"{SVG}title") for c in dots]
    assert titles[0] == "d1: delivered rate 50.0 % (2 sessions)"


def test_labels_and_title_are_escaped() -> None:
    markup = str(rate_chart([Point("<b>", 0.5, 0.5, 1, 0)], title="<script>x</script>"))
    assert "<script>" not in markup and "&lt;script&gt;" in markup
    assert "<b>" not in markup
    assert not re.search(r"\sstyle=", markup), "inline style is refused by the page's CSP"


def test_long_ranges_keep_at_most_a_few_labels_and_always_the_last() -> None:
    points = [Point(f"day{i}", 0.5, 0.5, 1, 0) for i in range(60)]
    svg = parse(points)
    labels = [t.text for t in svg.iter(f"{SVG}text") if (t.text or "").startswith("day")]
    assert labels[0] == "day0" and labels[-1] == "day59" and len(labels) <= 8


def test_bars_under_the_rates_show_how_many_sessions_each_period_holds() -> None:
    points = [
        Point("d1", 1.0, 0.5, 2, 1),
        Point("d2", None, None, 0, 0),
        Point("d3", 1.0, 1.0, 8, 0),
    ]
    svg = parse(points)
    bars = [r for r in svg.iter(f"{SVG}rect") if r.get("class") == "bar"]
    # No bar for a period without a session; the busiest period's bar is the tallest.
    assert [b.findtext(f"{SVG}title") for b in bars] == [
        "d1: 2 sessions, 1 silent failures",
        "d3: 8 sessions, 0 silent failures",
    ]
    heights = [float(b.get("height") or 0) for b in bars]
    assert heights[1] == 4 * heights[0]
    # The bars stand below the rates' plot: the lowest rate dot is above every bar.
    lowest_dot = max(float(c.get("cy") or 0) for c in svg.iter(f"{SVG}circle"))
    assert all(float(b.get("y") or 0) > lowest_dot for b in bars)


def test_series_draw_one_delivered_line_each_instead_of_the_overall_two() -> None:
    points = [Point(f"d{i}", 0.5, 0.5, 2, 0) for i in range(3)]
    series = [Series(f"agent-{n}", (1.0, 0.5, None), (1, 2, 0)) for n in range(MAX_SERIES + 2)]
    svg = ET.fromstring(str(rate_chart(points, title="t", series=series)))
    lines = [line.get("class") for line in svg.iter(f"{SVG}polyline")]
    assert lines == [f"line series s{n}" for n in range(MAX_SERIES)]
    titles = [c.findtext(f"{SVG}title") for c in svg.iter(f"{SVG}circle")]
    assert "d1: agent-0 delivered rate 50.0 % (2 sessions)" in titles
    assert not any("done rate" in (t or "") for t in titles)
