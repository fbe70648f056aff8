"""The dashboard's routes: pages for people, beside the API, on the same store.

Who may look: a token of scope ``read`` (or ``admin``), sent as a bearer token
or as the session cookie the login page sets once it has checked one. The
cookie holds the token itself, HttpOnly and SameSite=Strict, so that revoking
or expiring a token ends every dashboard session made with it at once.

Every page is rendered on the server with autoescaping (agent names, paths and
findings come from reports, which anyone with an ingest token writes), and
carries a Content-Security-Policy that allows no script at all and only our
own stylesheet.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader

from verifier.errors import BadRequest, NotFound
from verifier.service import auth
from verifier.service.dashboard import views
from verifier.service.dashboard.chart import rate_chart
from verifier.store import Store
from verifier.store.tokens import TokenRow, authenticate

COOKIE = "verifier_dashboard"
SCOPE = "read"
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
# A login form is small: anything longer is not one.
MAX_FORM_BYTES = 4096

_env = Environment(
    loader=PackageLoader("verifier.service.dashboard", "templates"),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _pct(rate: float | None) -> str:
    """A rate as the dashboard shows it: one decimal, or a dash when nothing concluded."""
    return "—" if rate is None else f"{rate * 100:.1f} %"


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "—"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


_env.filters["pct"] = _pct
_env.filters["when"] = _when
_env.filters["short"] = lambda sha: "—" if not sha else sha[:12]
# Long expected/found values (hashes, outputs) are cut on the page; the title keeps them whole.
_env.filters["clip"] = lambda text: text if len(text) <= 40 else text[:24] + "…"

router = APIRouter(include_in_schema=False)


def _page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = _env.get_template(template).render(**context)
    return HTMLResponse(html, status_code=status, headers=HEADERS)


def _redirect(location: str) -> RedirectResponse:
    return RedirectResponse(location, status_code=303, headers=HEADERS)


def _store(request: Request) -> Store:
    store: Store = request.app.state.service.store
    return store


def _presented(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return request.cookies.get(COOKIE) or None


async def _viewer(request: Request) -> TokenRow | Response:
    """The token behind this request, or the answer to give instead: the login page
    for no usable token, a 403 page for a token of another scope."""
    secret = _presented(request)
    token = None
    if secret is not None:
        token = await run_in_threadpool(authenticate, _store(request), secret)
    refused = auth.refusal(token, SCOPE, datetime.now(UTC))
    if refused is None:
        assert token is not None
        return token
    if refused.status == 403:
        return _page("error.html", 403, title="Not allowed", problem=refused.problem, token=None)
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    response = _redirect("/login?" + urlencode({"next": target}))
    if secret is not None and request.cookies.get(COOKIE):
        response.delete_cookie(COOKIE, path="/")
    return response


def _safe_next(target: str) -> str:
    """Where to go after logging in: a path of ours, never another site."""
    # Browsers drop tabs and newlines from a URL ("/\t/evil" is "//evil"): none allowed.
    if any(c <= " " or c == "\\" for c in target):
        return "/"
    if target.startswith("/") and not target.startswith("//"):
        return target
    return "/"


@router.get("/login")
async def login_page(request: Request, next: str = "/") -> Response:
    return _page("login.html", title="Log in", next=_safe_next(next), problem=None, token=None)


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the posted token; on success set the cookie and go where the user was going."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        problem = f"the form is {len(body)} bytes, over the limit of {MAX_FORM_BYTES}"
        return _page("login.html", 400, title="Log in", next="/", problem=problem, token=None)
    form = parse_qs(body.decode("utf-8", errors="replace"))
    secret = (form.get("token") or [""])[0].strip()
    target = _safe_next((form.get("next") or ["/"])[0])
    if not secret:
        problem = "token: got nothing, expected a token of scope read (verifier token create)"
        return _page("login.html", 400, title="Log in", next=target, problem=problem, token=None)
    token = await run_in_threadpool(authenticate, _store(request), secret)
    refused = auth.refusal(token, SCOPE, datetime.now(UTC))
    if refused is not None:
        return _page(
            "login.html",
            refused.status,
            title="Log in",
            next=target,
            problem=f"token: {refused.problem}",
            token=None,
        )
    response = _redirect(target)
    response.set_cookie(
        COOKIE,
        secret,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    response = _redirect("/login")
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response


_STATIC = {"dashboard.css": "text/css", "favicon.svg": "image/svg+xml"}


@router.get("/static/{name}")
async def static(name: str) -> Response:
    """The stylesheet and the icon: every asset a page uses is served from here."""
    if name not in _STATIC:
        return _page("error.html", 404, title="Not found", problem=f"no asset {name!r}", token=None)
    data = resources.files("verifier.service.dashboard").joinpath("static", name).read_bytes()
    headers = {**HEADERS, "Cache-Control": "max-age=300"}
    return Response(data, media_type=_STATIC[name], headers=headers)


@router.get("/")
async def overview(request: Request) -> Response:
    viewer = await _viewer(request)
    if isinstance(viewer, Response):
        return viewer
    try:
        filters = views.Filters.parse(dict(request.query_params))
        page = await run_in_threadpool(views.overview, _store(request), filters)
    except BadRequest as exc:
        return _page("error.html", 400, title="Bad request", problem=str(exc), token=viewer)
    period = "week" if page.period == "week" else "day"
    if page.series is None:
        title = f"Delivered rate and done rate by {period}, among conclusive sessions"
    else:
        title = f"Delivered rate by {period} of each {filters.lines}, among conclusive sessions"
    title += ", over the number of sessions"
    chart = rate_chart(page.points, title=title, series=page.series)

    def link(**changes: Any) -> str:
        return "/?" + urlencode(filters.query(**changes))

    today = datetime.now(UTC).date()
    presets = [
        (label, today - timedelta(days=days - 1), today)
        for label, days in (("today", 1), ("7 d", 7), ("30 d", 30))
    ]
    return _page(
        "overview.html",
        title="Delivery",
        page=page,
        filters=filters,
        chart=chart,
        link=link,
        presets=presets,
        sessions_link=lambda query: "/sessions?" + urlencode(query),
        token=viewer,
    )


@router.get("/sessions")
async def sessions(request: Request) -> Response:
    """Every session, newest ended first, filtered and searched, a page at a time."""
    viewer = await _viewer(request)
    if isinstance(viewer, Response):
        return viewer
    try:
        filters = views.ListFilters.parse(dict(request.query_params))
        page = await run_in_threadpool(
            views.session_list, _store(request), filters, datetime.now(UTC)
        )
    except BadRequest as exc:
        return _page("error.html", 400, title="Bad request", problem=str(exc), token=viewer)

    def link(**changes: Any) -> str:
        return "/sessions?" + urlencode(filters.query(**changes))

    return _page(
        "sessions.html", title="Sessions", page=page, filters=filters, link=link, token=viewer
    )


@router.get("/sessions/{session_id}")
async def session(request: Request, session_id: str) -> Response:
    viewer = await _viewer(request)
    if isinstance(viewer, Response):
        return viewer
    profiles = request.app.state.service.config.profiles_dir
    try:
        page = await run_in_threadpool(views.session_page, _store(request), session_id, profiles)
    except NotFound as exc:
        return _page("error.html", 404, title="Not found", problem=str(exc), token=viewer)
    return _page("session.html", title=f"Session {session_id}", page=page, token=viewer)
