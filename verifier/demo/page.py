"""The demo's done-versus-delivered view as one static HTML page, in the dashboard's dress.

Rendered by Jinja2 with autoescaping, in the markup of the dashboard's
overview (`verifier/service/dashboard/templates/overview.html`: its headline figures,
its data table, its verdict classes) with the dashboard's stylesheet
(`verifier/service/dashboard/static/dashboard.css`) inlined: one file that opens from
disk, with no script, no link and nothing fetched. The live dashboard
(`verifier serve`) shows the same store with its filters and history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from jinja2 import DictLoader, Environment

from verifier.findings import Verification

_env = Environment(
    loader=DictLoader(
        {"demo.html": resources.files("verifier.demo").joinpath("page.html").read_text("utf-8")}
    ),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
)
# As the dashboard shows a rate: one decimal.
_env.filters["pct"] = lambda rate: f"{rate * 100:.1f} %"


def render(
    verifications: Sequence[Verification],
    rates: Mapping[str, Any],
    stories: Mapping[str, str] | None = None,
    browse: Sequence[str] = (),
) -> str:
    """The page: the totals, one row per session (status, verdict, first finding), and
    `browse`, the commands that open the live dashboard on the same store."""
    stories = stories or {}
    rows = [
        {"v": v, "story": stories.get(v.session_id), "finding": v.first_finding}
        for v in verifications
    ]
    silent = sum(1 for v in verifications if v.done and v.delivery_status.value == "not_delivered")
    css = (
        resources.files("verifier.service.dashboard.static")
        .joinpath("dashboard.css")
        .read_text("utf-8")
    )
    return _env.get_template("demo.html").render(
        css=css, rates=rates, rows=rows, silent=silent, browse=list(browse)
    )
