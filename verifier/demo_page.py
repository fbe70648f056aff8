"""The demo's done-versus-delivered view as one static HTML page.

Self-contained (its style inline, no script, nothing fetched), every value
escaped; a pure function from the verifications to the page's text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from verifier.findings import DeliveryStatus, Verification
from verifier.render import finding_short

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 64rem;
       color: #1d2330; padding: 0 1rem; }
h1 { font-size: 1.4rem; margin-bottom: .2rem; }
p.lead { color: #5a6270; margin-top: 0; }
.rates { display: flex; gap: 1rem; margin: 1.2rem 0; }
.rate { border: 1px solid #d6dbe3; border-radius: 6px; padding: .6rem 1rem; min-width: 11rem; }
.rate b { display: block; font-size: 1.6rem; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .45rem .6rem; border-bottom: 1px solid #e4e8ee; }
th { font-size: .8rem; text-transform: uppercase; letter-spacing: .04em; color: #5a6270; }
code { font-size: .85rem; }
.delivered { color: #11683a; font-weight: 600; }
.not_delivered { color: #a3241a; font-weight: 600; }
.inconclusive, .pending { color: #8a5a00; font-weight: 600; }
.story { color: #5a6270; font-size: .85rem; }
"""


def render(
    verifications: Sequence[Verification],
    rates: Mapping[str, Any],
    stories: Mapping[str, str] | None = None,
) -> str:
    """The page: the two rates, then one row per session (agent status, verdict, first finding)."""
    stories = stories or {}
    rows = []
    for v in verifications:
        verdict = v.delivery_status.value
        first = v.first_finding
        story = stories.get(v.session_id)
        rows.append(
            "<tr>"
            f"<td><code>{escape(v.session_id)}</code>"
            + (f'<div class="story">{escape(story)}</div>' if story else "")
            + "</td>"
            f"<td>{escape(v.agent_status)}</td>"
            f"<td>{'yes' if v.done else 'no'}</td>"
            f'<td class="{escape(verdict)}">{escape(_verdict_text(v.delivery_status))}</td>'
            f"<td><code>{escape(finding_short(first)) if first else ''}</code></td>"
            "</tr>"
        )
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>verifier demo: done versus delivered</title>"
        f"<style>{STYLE}</style></head><body>\n"
        "<h1>Done versus delivered</h1>\n"
        '<p class="lead">What each agent said it did, beside what the verifier proved.</p>\n'
        '<div class="rates">'
        f'<div class="rate">done rate<b>{rates["done_rate"]:.0%}</b>'
        f"{rates['done']} of {rates['sessions']}</div>"
        f'<div class="rate">delivered rate<b>{rates["delivered_rate"]:.0%}</b>'
        f"{rates['delivered']} of {rates['sessions']}</div>"
        "</div>\n"
        "<table><thead><tr><th>session</th><th>agent status</th><th>done</th>"
        "<th>verdict</th><th>first finding</th></tr></thead>\n<tbody>\n"
        + "\n".join(rows)
        + "\n</tbody></table>\n</body></html>\n"
    )


def _verdict_text(status: DeliveryStatus) -> str:
    return status.value.replace("_", " ")
