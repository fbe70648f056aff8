"""The HTTP API: a face of `verifier.app.pipeline` and the store, nothing more.

`create_app(config, queue)` builds the FastAPI app; its lifespan opens the
store from ``config.database_url``. Routes read the body (async, bounded by
``max_report_bytes``), check the token, and hand the rest to the pipeline or
the store in the thread pool; none of them sequences a verification.

Every 4xx and 5xx has one shape, ``{"error": {"code", "field", "problem"}}``:
`code` is stable for scripts, `field` names the field, parameter or header at
fault (null when none is), `problem` says what is wrong in words. A database
that cannot be reached is a ``503`` (never a ``500``), and the pool reconnects
by itself once it is back.

The shapes below are pinned: later issues (the gate, overrides, signatures, the
witness) add keys beside these, never change them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from verifier import __version__
from verifier.config import Config
from verifier.service.api import docs, errors, openapi
from verifier.service.api.deps import ServiceState
from verifier.service.api.routers import admin, operations, reports, sessions, tasks
from verifier.service.dashboard import router as dashboard
from verifier.service.metrics import Metrics
from verifier.store import Store
from verifier.store.queue import Queue

__all__ = ["create_app"]


def create_app(config: Config, queue: Queue | None = None) -> FastAPI:
    """The API over the store at ``config.database_url``; `queue` takes verification jobs.

    Without a queue, reports are stored and never verified by this process, and
    re-verification answers 503.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = await run_in_threadpool(Store.open, config.database_url)
        app.state.service = ServiceState(config, store, queue, Metrics(store))
        try:
            yield
        finally:
            await run_in_threadpool(store.close)

    app = _Api(
        title="verifier",
        version=__version__,
        lifespan=lifespan,
        # FastAPI's own pages load their assets from a CDN: `docs` serves them offline.
        docs_url=None,
        redoc_url=None,
        responses=errors.responses(500, 503),
    )
    errors.install(app)
    # The order of the routers is the order of the paths in the document.
    for group in (sessions, tasks, reports, admin, operations):
        app.include_router(group.router)
    app.include_router(docs.router)
    app.include_router(dashboard)
    app.openapi = lambda: openapi.document(app)  # type: ignore[method-assign]
    return app


class _Api(FastAPI):
    """The API, answering ``POST /v1/sessions`` (the hot path: every report of every
    harness) with `sessions.post_session_direct`, and everything else through FastAPI."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] == scope.get("root_path", "") + "/v1/sessions"
        ):
            scope["app"] = self
            await sessions.post_session_direct(scope, receive, send)
            return
        await super().__call__(scope, receive, send)
