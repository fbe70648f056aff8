"""The dashboard in a real browser: Debian's Chromium, driven by Playwright, against a
real uvicorn server on the loopback and a seeded SQLite store.

Chromium (`tests.support.browser`) missing is a failure, unless the machine opts out
with VERIFIER_TEST_NO_BROWSER=1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.api import bearer, make_config, make_tokens, serve
from tests.support.browser import artifacts, chromium
from tests.support.dashboard_seed import RICH, XSS, seed
from tests.support.pages import COLUMNS, pct, shown
from verifier.service.api import create_app

# Enough presses of Tab to pass the header, the filters, the tabs and the table headings.
MAX_TABS = 80


# The cells of a table that reach past the viewport or are clipped by a scrolling box,
# and how many cells it has; labels come from each cell's data-label as a card's line.
CELLS_OUTSIDE = """table => {
  const cells = [...table.querySelectorAll('tbody th, tbody td')];
  const outside = cells.filter(c => {
    const box = c.getBoundingClientRect();
    return box.left < 0 || box.right > window.innerWidth + 0.5 || c.scrollWidth > c.clientWidth + 1;
  }).map(c => c.dataset.label + ': ' + c.textContent.slice(0, 40));
  return {count: cells.length, outside};
}"""


# Elements that reach past the viewport, and boxes whose content is hidden sideways
# (a box that scrolls or clips wider content), outside the boxes allowed to scroll. The
# skip link waits off screen and a table of cards keeps its headings for screen readers
# only, in a 1 px box: neither is shown.
PAST_THE_SCREEN = """allowed => {
  const shown = e => !e.closest('.skip') && !e.closest('table.cards thead')
    && !(allowed && e.closest(allowed));
  const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
    + (typeof e.className === 'string' && e.className ? '.' + e.className.replace(/ /g, '.') : '');
  const past = [], hidden = [];
  for (const e of document.querySelectorAll('body *')) {
    if (!shown(e)) continue;
    const box = e.getBoundingClientRect();
    if (box.width && (box.left < -0.5 || box.right > window.innerWidth + 0.5)) past.push(name(e));
    const x = getComputedStyle(e).overflowX;
    if (x !== 'visible' && e.scrollWidth > e.clientWidth + 1) hidden.push(name(e));
  }
  return {past, hidden};
}"""

# The rows of a table of cards whose cells do not each show their column's name: a
# cell's label must be its heading's text, drawn before it, and the cell must be seen.
UNLABELLED = """table => {
  const heads = [...table.querySelectorAll('thead th')].map(h => h.textContent.trim());
  const wrong = [];
  for (const row of table.querySelectorAll('tbody tr')) {
    const cells = [...row.children];
    if (cells.length !== heads.length) continue;
    cells.forEach((cell, i) => {
      const label = cell.dataset.label;
      const drawn = getComputedStyle(cell, '::before').content;
      const box = cell.getBoundingClientRect();
      if (label === undefined || !heads[i].startsWith(label) || drawn !== JSON.stringify(label)
          || box.height === 0 || getComputedStyle(cell).display !== 'block')
        wrong.push(`${heads[i]}: label ${label}, drawn ${drawn}, ${box.height} px high`);
    });
  }
  return {rows: table.querySelectorAll('tbody tr').length, wrong};
}"""


def _fits_the_screen(page: Any, path: str, allowed: str | None = None) -> None:
    """Nothing of `path` reaches past the viewport or hides sideways in a box (but in
    `allowed`), and every table of cards shows each cell under its column's name."""
    # What a reader may unfold is checked unfolded.
    page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
    width = page.evaluate("document.documentElement.scrollWidth")
    viewport = page.evaluate("window.innerWidth")
    assert width <= viewport, f"{path} is {width} px wide at a {viewport} px viewport"
    assert page.evaluate(PAST_THE_SCREEN, allowed) == {"past": [], "hidden": []}, path
    for table in page.locator("table.cards").all():
        cells = table.evaluate(CELLS_OUTSIDE)
        assert cells["count"] > 0 and not cells["outside"], (path, cells)
        labels = table.evaluate(UNLABELLED)
        assert labels["rows"] > 0 and not labels["wrong"], (path, labels)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    url = f"sqlite:///{tmp_path / 'browser.sqlite3'}"
    tokens = make_tokens(url)
    seed(url)
    with serve(create_app(make_config(url))) as base:
        yield base, tokens


def _page(browser: Any, base: str, width: int) -> tuple[Any, list[str], list[str]]:
    """A fresh page of `width` px; it records console errors and every URL it requests."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    problems: list[str] = []
    requested: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("request", lambda r: requested.append(r.url))
    return page, problems, requested


def _log_in(page: Any, base: str, token: str) -> None:
    page.goto(base + "/")
    assert page.url.startswith(base + "/login?next=")
    page.fill("#token", token)
    page.press("#token", "Enter")
    page.wait_for_url(base + "/")


def test_the_browser_shows_the_apis_numbers_and_reaches_a_session_by_keyboard(
    browser: Any, server: tuple[str, dict[str, str]]
) -> None:
    base, tokens = server
    stats = httpx.get(base + "/v1/stats", headers=bearer(tokens["read"])).json()
    by_agent = httpx.get(
        base + "/v1/stats", params={"group_by": "agent"}, headers=bearer(tokens["read"])
    ).json()["groups"]
    page, problems, requested = _page(browser, base, 1280)
    _log_in(page, base, tokens["read"])

    assert page.inner_text("#total-sessions") == str(stats["total"])
    assert page.inner_text("#done-rate") == pct(stats["done_rate"])
    assert page.inner_text("#delivered-rate") == pct(stats["delivered_rate"])
    assert page.inner_text("#silent-failures") == str(stats["silent_failures"])
    rows = page.locator("#groups tbody tr")
    table = {
        rows.nth(i).locator("th").inner_text(): [
            rows.nth(i).locator(f'[data-col="{c}"]').inner_text() for c in COLUMNS
        ]
        for i in range(rows.count())
    }
    assert table == {g["key"]: [shown(g, c) for c in COLUMNS] for g in by_agent}
    # An agent named with markup shows as that text, and no script element exists.
    assert XSS in table
    assert page.evaluate("document.querySelectorAll('script').length") == 0
    # The chart is drawn: one delivered point per day with a conclusive session.
    assert page.locator("svg.chart circle.dot.delivered").count() > 0
    page.screenshot(path=str(artifacts() / "overview-1280.png"), full_page=True)

    # The keyboard alone reaches a session: Tab to the first link of a session, Enter.
    for _ in range(MAX_TABS):
        page.keyboard.press("Tab")
        href = page.evaluate("document.activeElement.getAttribute('href')")
        if href and href.startswith("/sessions/"):
            break
    else:
        pytest.fail(f"{MAX_TABS} presses of Tab reached no session's link")
    focused = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert focused == "solid", "the focused link must show where the focus is"
    page.keyboard.press("Enter")
    page.wait_for_url(base + href)
    assert href.removeprefix("/sessions/") in page.inner_text("h1")

    # The rich session: follow a finding to its row, which the page highlights.
    page.goto(base + f"/sessions/{RICH}")
    # At 1280 px the three accounts stand side by side.
    boxes = [page.locator(f"#{t}").bounding_box() for t in ("changes", "calls", "entries")]
    assert boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"]
    page.click("#finding-2 a.goto")
    assert page.url.endswith("#entry-1")
    outline = page.evaluate("getComputedStyle(document.getElementById('entry-1')).outlineStyle")
    assert outline == "solid"
    page.screenshot(path=str(artifacts() / "session-1280.png"), full_page=True)

    # An override stands beside the computed verdict, on the same line.
    page.goto(base + "/sessions/a-2")
    computed = page.locator("#computed-verdict").bounding_box()
    override = page.locator("#override-verdict").bounding_box()
    assert page.inner_text("#override-verdict") == "delivered"
    assert computed["x"] < override["x"] and abs(computed["y"] - override["y"]) < 2
    page.screenshot(path=str(artifacts() / "session-override-1280.png"), full_page=True)

    assert not [p for p in problems if "Content Security Policy" in p or "Refused" in p], problems
    assert not problems, problems
    assert all(url.startswith(base) for url in requested), requested
    page.close()


def test_the_pages_fit_a_phone_screen(browser: Any, server: tuple[str, dict[str, str]]) -> None:
    base, tokens = server
    page, problems, _ = _page(browser, base, 390)
    _log_in(page, base, tokens["read"])
    for path, name in (
        ("/", "overview-390.png"),
        ("/sessions", "sessions-390.png"),
        (f"/sessions/{RICH}", "session-390.png"),
    ):
        page.goto(base + path)
        page.screenshot(path=str(artifacts() / name), full_page=True)
        # Only the chart scrolls sideways (its labels stay readable); every table is cards.
        _fits_the_screen(page, path, allowed=".chart-scroll")
    # The session's accounts and its runs are cards too: nothing of them scrolls.
    cards = page.evaluate("[...document.querySelectorAll('table.cards')].map(t => t.id)")
    assert {"changes", "calls", "entries", "runs", "test-counts"} <= set(cards), cards
    tables = page.evaluate("[...document.querySelectorAll('table')].map(t => t.id)")
    assert set(tables) == set(cards), "every table of the session page is cards at 390 px"
    # The three accounts stack on a phone: each starts below the one before.
    tops = [
        page.evaluate(f"document.getElementById('{t}').getBoundingClientRect().top")
        for t in ("changes", "calls", "entries")
    ]
    assert tops == sorted(tops) and len(set(tops)) == 3
    assert not problems, problems
    page.close()


@pytest.mark.parametrize("width", [1100, 800])
def test_the_pages_fit_a_tablet_screen(
    browser: Any, server: tuple[str, dict[str, str]], width: int
) -> None:
    """Between a phone and a desktop the tables are cards too: at 800 px the sessions
    list's eight columns reached past the screen, and the table by agent scrolled."""
    base, tokens = server
    page, problems, _ = _page(browser, base, width)
    _log_in(page, base, tokens["read"])
    for path in ("/", "/sessions", f"/sessions/{RICH}"):
        page.goto(base + path)
        _fits_the_screen(page, path)
    assert not problems, problems
    page.close()


# Every other view a reader reaches: lines per agent, another grouping and order, a
# moment typed in the range, the why-fail filter of the list, a search, an override, a
# refused filter and a session not stored.
PHONE_VIEWS = (
    "/?lines=agent",
    "/?by=model&sort=delivered_rate&dir=asc",
    "/?from=2026-11-21T10:30:00Z&to=2026-11-24",
    "/sessions?check=changes&code=change.missing",
    "/sessions?verdict=not_delivered&done=yes&q=a",
    "/sessions/a-2",
    "/?from=yesterday",
    "/sessions/nobody-stored-this",
)


def test_every_view_of_the_dashboard_fits_a_phone_screen(
    browser: Any, server: tuple[str, dict[str, str]]
) -> None:
    base, tokens = server
    page, problems, _ = _page(browser, base, 390)
    page.goto(base + "/login")
    _fits_the_screen(page, "/login")
    _log_in(page, base, tokens["read"])
    for path in PHONE_VIEWS:
        response = page.goto(base + path)
        assert response is not None and response.status in (200, 400, 404), path
        _fits_the_screen(page, path, allowed=".chart-scroll")
    assert page.locator("#override-verdict").count() == 0  # the last view is a 404
    assert not [p for p in problems if "404" not in p and "400" not in p], problems
    page.close()
