"""/docs and /redoc with no network: a real server on the loopback, Debian's Chromium
with every request that leaves the server refused, and every operation of the API's
document drawn by Swagger UI and by ReDoc, under a policy that runs only our scripts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.api import make_config, make_tokens, serve
from tests.support.browser import artifacts, chromium
from verifier.service.api import create_app


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def base(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'docs.sqlite3'}"
    make_tokens(url)
    with serve(create_app(make_config(url))) as served:
        yield served


def _offline_page(browser: Any, base: str) -> tuple[Any, list[str], list[str]]:
    """A page whose requests reach only `base`: the rest are refused and recorded, as are
    console errors (a CSP refusal is one)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))

    def only_ours(route: Any) -> None:
        if route.request.url.startswith(base + "/"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_ours)
    return page, problems, outside


def _operations(base: str) -> list[tuple[str, str, str]]:
    document = httpx.get(base + "/openapi.json").json()
    return [
        (method, path, operation["operationId"])
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    ]


def test_swagger_ui_draws_every_operation_without_the_network(browser: Any, base: str) -> None:
    operations = _operations(base)
    page, problems, outside = _offline_page(browser, base)
    response = page.goto(base + "/docs")
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe" not in csp
    page.wait_for_selector(".opblock", timeout=60_000)
    drawn = {
        (
            block.locator(".opblock-summary-method").inner_text().lower(),
            block.locator(".opblock-summary-path").get_attribute("data-path"),
        )
        for block in page.locator(".opblock").all()
    }
    assert drawn == {(method, path) for method, path, _ in operations}
    assert "verifier" in page.locator(".info .title").inner_text()
    page.screenshot(path=str(artifacts() / "docs-swagger-1280.png"))
    assert not outside, outside
    assert not problems, problems
    page.close()


def test_redoc_draws_every_operation_without_the_network(browser: Any, base: str) -> None:
    operations = _operations(base)
    page, problems, outside = _offline_page(browser, base)
    response = page.goto(base + "/redoc")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector("[data-section-id^='operation/']", timeout=60_000)
    sections = set(
        page.evaluate(
            "[...document.querySelectorAll('[data-section-id]')].map(e => e.dataset.sectionId)"
        )
    )
    assert {f"operation/{op}" for _, _, op in operations} <= sections
    page.screenshot(path=str(artifacts() / "docs-redoc-1280.png"))
    assert not outside, outside
    assert not problems, problems
    page.close()


def test_the_docs_assets_are_ours_and_nothing_else_is_served(base: str) -> None:
    for name, media in (
        ("swagger-ui-bundle.js", "text/javascript"),
        ("swagger-ui.css", "text/css"),
        ("redoc.standalone.js", "text/javascript"),
        ("swagger-init.js", "text/javascript"),
    ):
        response = httpx.get(f"{base}/docs/assets/{name}")
        assert response.status_code == 200 and response.headers["content-type"].startswith(media)
    assert b"cdn.redoc.ly" not in httpx.get(f"{base}/docs/assets/redoc.standalone.js").content
    for name in ("../__init__.py", "core.py", "other.js"):
        missing = httpx.get(f"{base}/docs/assets/{name}")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    for page in ("/docs", "/redoc"):
        html = httpx.get(base + page).text
        assert "<script>" not in html and "cdn." not in html and "https://" not in html
