"""The rate chart: delivered rate against done rate over time, with the volume of
sessions under it, as server-rendered SVG.

A pure function from points to markup, with no I/O and no script: the page's
Content-Security-Policy allows none, and nothing is fetched from elsewhere.
Colours come from the dashboard's stylesheet (classes), so the SVG carries no
inline style. The bars under the rates show how many sessions each period holds,
so that a day of two sessions swinging from 0 to 100 % reads as the two it is.
With `series`, the chart draws one delivered-rate line per agent or model instead
of the overall two.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

WIDTH = 960
HEIGHT = 340
_LEFT, _RIGHT, _TOP = 48, 16, 14
# The rates' plot ends at _RATE_BOTTOM; the volume bars stand from _BARS_BOTTOM up
# to _BARS_TOP; the period labels sit under them.
_RATE_BOTTOM, _BARS_TOP, _BARS_BOTTOM = 226, 244, 304
_MAX_LABELS = 7
# Lines per agent or model past this many are left out (the table has every one).
MAX_SERIES = 6


@dataclass(frozen=True)
class Point:
    """One period (a day or a week): its label and its rates, None when nothing concluded."""

    label: str
    done_rate: float | None
    delivered_rate: float | None
    sessions: int
    silent_failures: int


@dataclass(frozen=True)
class Series:
    """One agent's or model's delivered rate over the same periods as the chart's points."""

    name: str
    rates: tuple[float | None, ...]
    sessions: tuple[int, ...]


def _x(index: int, count: int) -> float:
    plot = WIDTH - _LEFT - _RIGHT
    return _LEFT + (plot / 2 if count == 1 else plot * index / (count - 1))


def _y(rate: float) -> float:
    return _TOP + (_RATE_BOTTOM - _TOP) * (1 - rate)


def _segments(rates: Sequence[float | None]) -> list[list[tuple[int, float]]]:
    """Runs of consecutive periods that have a rate: a period without one breaks the line."""
    runs: list[list[tuple[int, float]]] = []
    current: list[tuple[int, float]] = []
    for i, rate in enumerate(rates):
        if rate is None:
            if current:
                runs.append(current)
            current = []
        else:
            current.append((i, rate))
    if current:
        runs.append(current)
    return runs


def _pct(rate: float | None) -> str:
    return "no conclusive session" if rate is None else f"{rate * 100:.1f} %"


def _line(
    out: list[str],
    css: str,
    what: str,
    labels: Sequence[str],
    rates: Sequence[float | None],
    sessions: Sequence[int],
) -> None:
    count = len(labels)
    for run in _segments(rates):
        coords = " ".join(f"{_x(i, count):.1f},{_y(r):.1f}" for i, r in run)
        if len(run) > 1:
            out.append(f'<polyline class="line {css}" points="{coords}"/>')
        for i, rate in run:
            out.append(
                f'<circle class="dot {css}" cx="{_x(i, count):.1f}" cy="{_y(rate):.1f}" r="3.5">'
                f"<title>{escape(labels[i])}: {escape(what)} {_pct(rate)} "
                f"({sessions[i]} sessions)</title></circle>"
            )


def _bars(out: list[str], points: Sequence[Point]) -> None:
    """A bar per period, as tall as its share of the busiest period's sessions."""
    count = len(points)
    most = max(p.sessions for p in points)
    plot = WIDTH - _LEFT - _RIGHT
    width = max(1.0, min(24.0, plot / max(count, 1) * 0.6))
    out.append(
        f'<line class="grid" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" '
        f'y1="{_BARS_BOTTOM}" y2="{_BARS_BOTTOM}"/>'
        f'<text class="axis" x="{_LEFT - 6}" y="{_BARS_TOP + 8}" text-anchor="end">{most}</text>'
        f'<text class="axis" x="{_LEFT - 6}" y="{_BARS_BOTTOM}" text-anchor="end">0</text>'
    )
    for i, point in enumerate(points):
        if not point.sessions:
            continue
        height = (_BARS_BOTTOM - _BARS_TOP) * point.sessions / most
        # Centred on its period, kept inside the plot (the first and last would overhang).
        left = min(max(_x(i, count) - width / 2, _LEFT), WIDTH - _RIGHT - width)
        out.append(
            f'<rect class="bar" x="{left:.1f}" '
            f'y="{_BARS_BOTTOM - height:.1f}" width="{width:.1f}" height="{height:.1f}">'
            f"<title>{escape(point.label)}: {point.sessions} sessions, "
            f"{point.silent_failures} silent failures</title></rect>"
        )


def rate_chart(
    points: Sequence[Point], *, title: str, series: Sequence[Series] | None = None
) -> Markup:
    """The chart of `points` in order, as an inline ``<svg>`` (role img, titled): the
    done and delivered rates, or one delivered-rate line per `series`, over bars of the
    number of sessions in each period."""
    out: list[str] = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-labelledby="chart-title" preserveAspectRatio="xMidYMid meet" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f'<title id="chart-title">{escape(title)}</title>',
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        y = _y(tick)
        out.append(
            f'<line class="grid" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="axis" x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{int(tick * 100)} %</text>"
        )
    count = len(points)
    if count == 0:
        out.append(
            f'<text class="empty" x="{WIDTH / 2}" y="{_RATE_BOTTOM / 2}" text-anchor="middle">'
            "no session in this range</text></svg>"
        )
        return Markup("".join(out))
    step = max(1, -(-count // _MAX_LABELS))
    for i, point in enumerate(points):
        # Every step-th label, and the last one; a label too close before the last is left out.
        if (i % step == 0 and count - 1 - i >= step / 2) or i == count - 1:
            # The first and last labels align inwards, so that neither is cut off.
            anchor = "start" if i == 0 and count > 1 else "middle"
            anchor = "end" if i == count - 1 and count > 1 else anchor
            out.append(
                f'<text class="axis" x="{_x(i, count):.1f}" y="{HEIGHT - 12}" '
                f'text-anchor="{anchor}">{escape(point.label)}</text>'
            )
    if any(p.sessions for p in points):
        _bars(out, points)
    labels = [p.label for p in points]
    if series is None:
        sessions = [p.sessions for p in points]
        _line(out, "done", "done rate", labels, [p.done_rate for p in points], sessions)
        rates = [p.delivered_rate for p in points]
        _line(out, "delivered", "delivered rate", labels, rates, sessions)
    else:
        for n, one in enumerate(series[:MAX_SERIES]):
            what = f"{one.name or '(none)'} delivered rate"
            _line(out, f"series s{n}", what, labels, one.rates, one.sessions)
    out.append("</svg>")
    return Markup("".join(out))
