"""The rate chart: delivered rate against done rate over time, as server-rendered SVG.

A pure function from points to markup, with no I/O and no script: the page's
Content-Security-Policy allows none, and nothing is fetched from elsewhere.
Colours come from the dashboard's stylesheet (classes), so the SVG carries no
inline style.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

WIDTH = 960
HEIGHT = 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 48, 16, 14, 34
_MAX_LABELS = 7


@dataclass(frozen=True)
class Point:
    """One period (a day or a week): its label and its rates, None when nothing concluded."""

    label: str
    done_rate: float | None
    delivered_rate: float | None
    sessions: int
    silent_failures: int


def _x(index: int, count: int) -> float:
    plot = WIDTH - _LEFT - _RIGHT
    return _LEFT + (plot / 2 if count == 1 else plot * index / (count - 1))


def _y(rate: float) -> float:
    plot = HEIGHT - _TOP - _BOTTOM
    return _TOP + plot * (1 - rate)


def _segments(points: Sequence[Point], attr: str) -> list[list[tuple[int, float]]]:
    """Runs of consecutive points that have a rate: a period without one breaks the line."""
    runs: list[list[tuple[int, float]]] = []
    current: list[tuple[int, float]] = []
    for i, point in enumerate(points):
        rate = getattr(point, attr)
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


def rate_chart(points: Sequence[Point], *, title: str) -> Markup:
    """The chart of `points` in order, as an inline ``<svg>`` (role img, titled)."""
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
            f'<text class="empty" x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">'
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
    for attr, css in (("done_rate", "done"), ("delivered_rate", "delivered")):
        for run in _segments(points, attr):
            coords = " ".join(f"{_x(i, count):.1f},{_y(r):.1f}" for i, r in run)
            if len(run) > 1:
                out.append(f'<polyline class="line {css}" points="{coords}"/>')
            for i, rate in run:
                point = points[i]
                out.append(
                    f'<circle class="dot {css}" cx="{_x(i, count):.1f}" '
                    f'cy="{_y(rate):.1f}" r="3.5">'
                    f"<title>{escape(point.label)}: {css} rate {_pct(rate)} "
                    f"({point.sessions} sessions)</title></circle>"
                )
    out.append("</svg>")
    return Markup("".join(out))
