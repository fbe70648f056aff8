"""Reading the dashboard's pages back in tests: figures by element id, table rows by key."""

from __future__ import annotations

import html
import re
from typing import Any

from fastapi.testclient import TestClient

from tests.support.api import bearer

COLUMNS = ("total", "done_rate", "delivered_rate", "silent_failures", "inconclusive", "pending")


def login(client: TestClient, token: str, target: str = "/") -> None:
    """Log `client` in on the login page with `token`; it lands on `target`."""
    response = client.post("/login", data={"token": token, "next": target})
    assert response.status_code == 303, response.text
    assert response.headers["location"] == target


def api(client: TestClient, token: str, path: str, **params: Any) -> Any:
    """The API's JSON answer to GET `path` with `params`, as `token` sees it."""
    response = client.get(path, params=params, headers=bearer(token))
    assert response.status_code == 200, response.text
    return response.json()


def list_ids(page: str) -> list[str]:
    """The session ids of the sessions list, in page order."""
    return [
        html.unescape(s) for s in re.findall(r'data-session="([^"]*)"', table(page, "sessions"))
    ]


def pct(rate: float | None) -> str:
    """A rate of the API as the dashboard prints it."""
    return "—" if rate is None else f"{rate * 100:.1f} %"


def shown(counts: dict[str, Any], column: str) -> str:
    """An API count or rate, as the dashboard prints it."""
    value = counts[column]
    return pct(value) if column.endswith("_rate") else str(value)


def by_id(page: str, element_id: str) -> str:
    """The text of the element with `element_id` (no nested markup)."""
    match = re.search(rf'id="{re.escape(element_id)}">([^<]*)<', page)
    assert match is not None, f"no element with id {element_id!r}"
    return html.unescape(match.group(1))


def table(page: str, table_id: str) -> str:
    match = re.search(rf'<table[^>]* id="{re.escape(table_id)}">(.*?)</table>', page, re.S)
    assert match is not None, f"no table with id {table_id!r}"
    return match.group(1)


def group_rows(page: str) -> dict[str, dict[str, str]]:
    """The table by agent, model or repository: {key: {column: text}}, in page order."""
    rows: dict[str, dict[str, str]] = {}
    for key, body in re.findall(r'<tr data-key="([^"]*)">(.*?)</tr>', table(page, "groups"), re.S):
        cells = re.findall(r'data-col="(\w+)">([^<]*)<', body)
        rows[html.unescape(key)] = {col: html.unescape(text) for col, text in cells}
    return rows


def silent_ids(page: str) -> list[str]:
    return [html.unescape(s) for s in re.findall(r'data-session="([^"]*)"', table(page, "silent"))]


def period_rows(page: str) -> dict[str, list[str]]:
    """The figures behind the chart: {period: [sessions, done rate, delivered rate, silent]}."""
    rows = {}
    for label, body in re.findall(
        r'<tr><th scope="row"[^>]*>([^<]*)</th>(.*?)</tr>', table(page, "by-period"), re.S
    ):
        rows[label] = [html.unescape(c) for c in re.findall(r"<td[^>]*>([^<]*)</td>", body)]
    return rows


def period_figures(groups: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The API's day or week groups as the figures behind the chart show them."""
    return {
        g["key"]: [
            str(g["total"]),
            pct(g["done_rate"]),
            pct(g["delivered_rate"]),
            str(g["silent_failures"]),
        ]
        for g in groups
    }
