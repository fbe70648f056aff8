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

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException

from verifier import __version__, resources
from verifier.app import export, pipeline
from verifier.app.pipeline import KEPT_BYTES, BoundedBody, Oversized
from verifier.config import Config
from verifier.errors import (
    BadRequest,
    Forbidden,
    InfrastructureError,
    InvalidReport,
    NotFound,
    ReportPruned,
    SessionConflict,
    VerifierError,
    WitnessConflict,
)
from verifier.moments import utc_text
from verifier.service import auth
from verifier.service.dashboard import router as dashboard
from verifier.service.metrics import CONTENT_TYPE, Metrics
from verifier.store import Counts as StoreCounts
from verifier.store import Listed, RunRow, SessionFilter, SessionRow, Store
from verifier.store.engine import HEAD_REVISION
from verifier.store.overrides import OverrideRow, overridden_count, overrides, record_override
from verifier.store.probes import schema_revision
from verifier.store.queue import Queue
from verifier.store.tokens import TokenRow, authenticate

log = logging.getLogger("verifier.api")

DeliveryStatus = Literal["pending", "delivered", "not_delivered", "inconclusive"]
RunVerdict = Literal["delivered", "not_delivered", "inconclusive"]
GroupBy = Literal["day", "week", "agent", "model", "repo"]
MAX_PAGE = 500
# Row ids are 32-bit integers on PostgreSQL: a larger one is a bad request, not a query.
MAX_ID = 2**31 - 1
# Text no database column can hold (PostgreSQL refuses NUL) is refused as a bad request.
_NO_NUL = r"^[^\x00]*$"
SessionId = Annotated[str, Path(max_length=128, pattern=_NO_NUL)]
Filter = Annotated[str | None, Query(pattern=_NO_NUL)]
RowId = Annotated[int, Path(ge=1, le=MAX_ID)]


def _in_utc(moment: datetime) -> datetime:
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise ValueError("is out of range once in UTC") from None


Moment = Annotated[AwareDatetime, AfterValidator(_in_utc)]
RETRY_AFTER_S = "5"
REPORT_SCHEMA = resources.report_schema_file()


# -- response shapes (the OpenAPI document is generated from these) -------------------


class _Open(BaseModel):
    # Later issues add keys beside the pinned ones; clients must ignore what they do not know.
    model_config = ConfigDict(extra="allow")


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable: bad_request, invalid_report, unauthorized, ...")
    field: str | None = Field(description="The field, parameter or header at fault, if one is.")
    problem: str = Field(description="What is wrong, in words.")


class ErrorBody(_Open):
    error: ErrorDetail


class Accepted(_Open):
    session_id: str
    status: Literal["pending"]
    url: str


class Agent(_Open):
    name: str
    version: str | None
    model: str | None
    tool_profile: str | None


class Repo(_Open):
    name: str
    base_commit: str
    head_commit: str | None
    branch: str | None


class RunSummary(_Open):
    id: int
    delivery_status: RunVerdict
    verified_at: datetime
    started_at: datetime
    duration_s: float
    verifier_version: str
    reason: str | None
    checks: dict[str, str] = Field(description="Each check's status: pass, fail, error, skipped.")


class SessionSummary(_Open):
    session_id: str
    url: str
    agent_status: str = Field(description="The agent's own status, canonical (done, ...).")
    raw_agent_status: str = Field(description="The status as the report wrote it.")
    done: bool
    delivery_status: DeliveryStatus = Field(
        description="The latest conclusive verdict; inconclusive when no run concluded; "
        "pending before the first run."
    )
    override_status: Literal["delivered", "not_delivered"] | None = Field(
        default=None,
        description="A person's standing override (POST .../override), beside the computed "
        "`delivery_status`, never in its place; null when none stands.",
    )
    effective_status: DeliveryStatus = Field(
        default="pending",
        description="`override_status` when one stands, else `delivery_status`: what a "
        "merge gate decides on. The stats count `delivery_status`.",
    )
    verified_at: datetime | None = Field(description="When the latest run finished.")
    verdict_run_id: int | None
    latest_run_id: int | None
    agent: Agent
    repo: Repo
    started_at: datetime
    ended_at: datetime
    ingested_at: datetime
    report_sha256: str


class Override(_Open):
    id: int
    at: datetime
    author: str = Field(description='"token:<name>" or "cli:<user>".')
    status: Literal["delivered", "not_delivered", "cleared"]
    reason: str


class OverrideRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["delivered", "not_delivered", "cleared"] = Field(
        description="cleared withdraws the standing override."
    )
    reason: Annotated[str, Field(min_length=1, max_length=4000, pattern=_NO_NUL)]


class SessionDetail(SessionSummary):
    checks: dict[str, Any] = Field(
        description="The verdict run's checks (status, findings, details, notes); "
        "the latest run's when none concluded; empty while pending."
    )
    runs: list[RunSummary] = Field(description="Every verification run, oldest first.")
    overrides: list[Override] = Field(
        default_factory=list, description="Every override, oldest first; the last one stands."
    )


class SessionPage(_Open):
    sessions: list[SessionSummary]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page.")


class Counts(_Open):
    total: int
    done: int
    delivered: int
    not_delivered: int
    inconclusive: int
    pending: int
    silent_failures: int = Field(description="Done, but not delivered.")
    done_rate: float | None = Field(description="Done among conclusive sessions.")
    delivered_rate: float | None = Field(description="Delivered among conclusive sessions.")


class Group(Counts):
    key: str


class StatsBody(Counts):
    groups: list[Group]
    verdicts: Literal["computed"] = Field(
        default="computed", description="The counts are of computed verdicts, never overrides."
    )
    overridden: int = Field(
        default=0,
        description="Of the sessions counted, those carrying a person's override (counted "
        "by their computed verdict).",
    )


class RejectedSummary(_Open):
    id: int
    url: str
    received_at: datetime
    source: str
    field: str
    problem: str
    report_sha256: str = Field(description="SHA-256 of the whole body as it was received.")
    report_size: int = Field(description="Bytes received; more than kept when over the limit.")


class RejectedPage(_Open):
    rejected: list[RejectedSummary]
    next_before: int | None = Field(description="Pass as `before` for the next page.")


class Reverify(_Open):
    session_id: str
    status: Literal["queued"]
    url: str


class ReceiptBody(_Open):
    session_id: str
    count: int = Field(description="Entries witnessed, from index 0.")
    head_hash: str = Field(description="The hash of the last entry witnessed.")
    time: str = Field(description="When the service held them (RFC 3339 UTC).")


class ReceiptSignature(_Open):
    alg: Literal["ed25519"]
    key_id: str = Field(description="Hex SHA-256 of the service's raw public key.")
    value: str = Field(description="Base64 Ed25519 signature over the receipt's JCS form.")


class SignedReceipt(_Open):
    receipt: ReceiptBody
    signature: ReceiptSignature


class Health(_Open):
    status: Literal["ok"]
    version: str


class Ready(_Open):
    status: Literal["ready"]
    checks: dict[str, str]


class NotReady(ErrorBody):
    checks: dict[str, str]


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": ErrorBody} for status in statuses}


# -- errors ---------------------------------------------------------------------------


def _error(
    status: int,
    code: str,
    problem: str,
    field: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    body = {"error": {"code": code, "field": field, "problem": problem}, **extra}
    return JSONResponse(body, status_code=status, headers=headers)


class _Refused(Exception):
    """A refusal raised where returning is not possible (a dependency), in the one shape.

    Plumbing of this face, not an error of the verifier: `verifier.errors` holds those.
    """

    def __init__(self, status: int, code: str, problem: str, field: str | None = None) -> None:
        super().__init__(problem)
        self.status = status
        self.code = code
        self.problem = problem
        self.field = field


async def _on_refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, _Refused)
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return _error(exc.status, exc.code, exc.problem, exc.field, headers=headers)


_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "bad_request" if exc.status_code < 500 else "error")
    headers = dict(exc.headers) if exc.headers else None
    return _error(exc.status_code, code, str(exc.detail), headers=headers)


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0]
    loc = [str(part) for part in first.get("loc", ())]
    field = loc[-1] if loc else None
    problem = str(first.get("msg", "is not valid"))
    if "input" in first and first.get("type") != "missing":
        problem = f"{problem} (got {first['input']!r})"
    return _error(400, "bad_request", problem, field)


async def _on_verifier_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, InvalidReport):
        return _error(400, "invalid_report", exc.problem, exc.field)
    if isinstance(exc, Forbidden):
        return _error(403, "forbidden", exc.problem, exc.field)
    if isinstance(exc, WitnessConflict):
        return _error(409, "witness_conflict", str(exc), "entries", index=exc.index)
    if isinstance(exc, BadRequest):
        return _error(400, "bad_request", exc.problem, exc.field)
    if isinstance(exc, SessionConflict):
        return _error(409, "conflict", str(exc), "session_id")
    if isinstance(exc, ReportPruned):
        return _error(410, "pruned", str(exc))
    if isinstance(exc, NotFound):
        return _error(404, "not_found", str(exc))
    if isinstance(exc, InfrastructureError):
        return await _on_unavailable(request, exc)
    # A configuration the server was started with (the database behind this verifier).
    log.error("%s %s: %s", request.method, request.url.path, exc)
    return _error(503, "unavailable", "the service is misconfigured: see its log")


async def _on_unavailable(request: Request, exc: Exception) -> Response:
    # The detail (which host, which error) goes to the log, not to any client.
    log.warning("%s %s: unavailable: %s", request.method, request.url.path, exc)
    return _error(
        503,
        "unavailable",
        "the database or the job queue cannot be reached; retry later",
        headers={"Retry-After": RETRY_AFTER_S},
    )


async def _on_bug(request: Request, exc: Exception) -> Response:
    log.exception("%s %s: internal error", request.method, request.url.path)
    return _error(500, "internal", "internal error (a bug): see the service's log")


# -- the app --------------------------------------------------------------------------


@dataclass
class _Service:
    """What the routes share: the configuration, the open store, the queue, the metrics."""

    config: Config
    store: Store
    queue: Queue | None
    metrics: Metrics


def create_app(config: Config, queue: Queue | None = None) -> FastAPI:
    """The API over the store at ``config.database_url``; `queue` takes verification jobs.

    Without a queue, reports are stored and never verified by this process, and
    re-verification answers 503.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = await run_in_threadpool(Store.open, config.database_url)
        app.state.service = _Service(config, store, queue, Metrics(store))
        try:
            yield
        finally:
            await run_in_threadpool(store.close)

    app = FastAPI(
        title="verifier",
        version=__version__,
        description=__doc__,
        lifespan=lifespan,
        responses=_errors(500, 503),
    )
    app.add_exception_handler(_Refused, _on_refused)
    app.add_exception_handler(HTTPException, _on_http_exception)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(VerifierError, _on_verifier_error)
    for unreachable in (OperationalError, InterfaceError, PoolTimeout):
        app.add_exception_handler(unreachable, _on_unavailable)
    app.add_exception_handler(Exception, _on_bug)
    _routes(app)
    app.include_router(dashboard)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _service(request: Request) -> _Service:
    service: _Service = request.app.state.service
    return service


_bearer = HTTPBearer(
    auto_error=False,
    description="A token of the endpoint's scope (`verifier token create`); admin may do all.",
)


def _require(scope: str) -> Callable[..., Awaitable[TokenRow]]:
    """A dependency admitting tokens of `scope` (or admin): 401 without one, 403 otherwise."""

    async def check(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> TokenRow:
        if credentials is None:
            problem = "no token: send `Authorization: Bearer <token>`"
            raise _Refused(401, "unauthorized", problem, "Authorization")
        store = _service(request).store
        token = await run_in_threadpool(authenticate, store, credentials.credentials)
        refused = auth.refusal(token, scope, datetime.now(UTC))
        if refused is not None:
            code = "unauthorized" if refused.status == 401 else "forbidden"
            raise _Refused(refused.status, code, refused.problem, "Authorization")
        assert token is not None
        return token

    return check


Ingest = Annotated[TokenRow, Depends(_require("ingest"))]
Read = Annotated[TokenRow, Depends(_require("read"))]
Admin = Annotated[TokenRow, Depends(_require("admin"))]
Export = Annotated[TokenRow, Depends(_require("export"))]
Service = Annotated[_Service, Depends(_service)]


def _filters(
    agent: Filter = None,
    model: Filter = None,
    repo: Filter = None,
    agent_status: Filter = None,
    done: bool | None = None,
    delivery_status: DeliveryStatus | None = None,
    head_commit: Annotated[
        list[Annotated[str, Field(pattern=_NO_NUL)]] | None,
        Query(description="A head commit; repeat for any of several (a merge gate's range)."),
    ] = None,
    branch: Filter = None,
    ended_from: Annotated[
        Moment | None,
        Query(alias="from", description="Sessions that ended at or after (ISO 8601)."),
    ] = None,
    ended_to: Annotated[
        Moment | None,
        Query(alias="to", description="Sessions that ended before (ISO 8601)."),
    ] = None,
) -> SessionFilter:
    """The session filters of a listing and of an export."""
    return SessionFilter(
        agent=agent,
        model=model,
        repo=repo,
        agent_status=agent_status,
        done=done,
        delivery_status=delivery_status,
        head_commits=tuple(head_commit) if head_commit else None,
        branch=branch,
        ended_from=ended_from,
        ended_to=ended_to,
    )


Filters = Annotated[SessionFilter, Depends(_filters)]


def _routes(app: FastAPI) -> None:
    @app.post(
        "/v1/sessions",
        status_code=202,
        response_model=Accepted,
        tags=["sessions"],
        summary="Submit a session report",
        responses={
            200: {"model": SessionDetail, "description": "Already stored with these bytes."},
            **_errors(400, 401, 403, 409, 413),
        },
        openapi_extra={
            "requestBody": {
                "required": True,
                "description": "The report's bytes (session report v1).",
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/SessionReport"}}
                },
            }
        },
    )
    async def post_session(request: Request, token: Ingest, service: Service) -> Response:
        """Store a report and queue its verification: 202 when new, 200 when already stored
        with these bytes, 409 when its session id is stored with other bytes."""
        limit = service.config.max_report_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return _error(
                413,
                "too_large",
                f"report is {declared} bytes, over the limit of {limit} bytes",
                "$",
                headers={"Connection": "close"},
            )
        raw = await _read_body(request, limit)
        try:
            session, created = await run_in_threadpool(
                _submit, service, raw, f"api:token:{token.name}", token.agent
            )
        except InvalidReport as exc:
            if isinstance(raw, Oversized):
                return _error(413, "too_large", exc.problem, exc.field)
            raise
        if created:
            url = _session_url(session.session_id)
            body = Accepted(session_id=session.session_id, status="pending", url=url)
            return JSONResponse(body.model_dump(mode="json"), status_code=202)
        detail = await run_in_threadpool(_session_detail, service.store, session.session_id)
        return JSONResponse(detail.model_dump(mode="json"), status_code=200)

    @app.post(
        "/v1/sessions/{session_id}/trail",
        response_model=SignedReceipt,
        tags=["sessions"],
        summary="Witness trail entries as the recorder writes them (ingest)",
        responses=_errors(400, 401, 403, 409, 413, 503),
        openapi_extra={
            "requestBody": {
                "required": True,
                "description": "JSON lines: one or more audit trail entries, in order.",
                "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
            }
        },
    )
    async def post_trail(
        session_id: SessionId, request: Request, token: Ingest, service: Service
    ) -> Response:
        """Check each entry extends the witnessed chain, keep it, and answer a receipt of
        the head seen, signed with the service's key: 409 with the first bad index when an
        entry does not extend it; entries posted again identically change nothing."""
        raw = await _read_body(request, service.config.max_report_bytes)
        if isinstance(raw, Oversized):
            return _error(413, "too_large", raw.error().problem, "entries")
        signed = await run_in_threadpool(_witness, service, session_id, raw, token.agent)
        return JSONResponse(SignedReceipt.model_validate(signed).model_dump(mode="json"))

    @app.get(
        "/v1/sessions/{session_id}",
        response_model=SessionDetail,
        tags=["sessions"],
        summary="A session, its verdict and its runs",
        responses=_errors(401, 403, 404),
    )
    async def get_session(session_id: SessionId, token: Read, service: Service) -> SessionDetail:
        return await run_in_threadpool(_session_detail, service.store, session_id)

    @app.get(
        "/v1/sessions",
        response_model=SessionPage,
        tags=["sessions"],
        summary="Sessions, newest ended first, filtered, a page at a time",
        responses=_errors(400, 401, 403),
    )
    async def list_sessions(
        token: Read,
        service: Service,
        filters: Filters,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        cursor: Annotated[
            str | None, Query(description="next_cursor of the previous page.")
        ] = None,
    ) -> SessionPage:
        page = await run_in_threadpool(
            service.store.find_sessions, filters, limit=limit, cursor=cursor
        )
        return SessionPage(
            sessions=[_summary(listed) for listed in page.items], next_cursor=page.next_cursor
        )

    @app.post(
        "/v1/sessions/{session_id}/verify",
        status_code=202,
        response_model=Reverify,
        tags=["sessions"],
        summary="Verify a session again (admin)",
        responses=_errors(401, 403, 404, 410, 503),
    )
    async def reverify(session_id: SessionId, token: Admin, service: Service) -> Reverify:
        """Queue a new verification; the act goes into the admin log first."""
        if service.queue is None:
            problem = "re-verification needs a job queue: this API was started without one"
            raise _Refused(503, "unavailable", problem)
        await run_in_threadpool(_reverify, service, session_id, f"token:{token.name}")
        return Reverify(session_id=session_id, status="queued", url=_session_url(session_id))

    @app.post(
        "/v1/sessions/{session_id}/override",
        response_model=SessionDetail,
        tags=["sessions"],
        summary="Override a session's verdict, beside the computed one (admin)",
        responses=_errors(400, 401, 403, 404),
    )
    async def override(
        session_id: SessionId, request: OverrideRequest, token: Admin, service: Service
    ) -> SessionDetail:
        """Record a person's verdict with who, why and when (and in the admin log). The
        computed verdict, its runs and the stats are unchanged; `cleared` withdraws it."""
        await run_in_threadpool(
            record_override,
            service.store,
            session_id,
            status=request.status,
            reason=request.reason,
            author=f"token:{token.name}",
        )
        return await run_in_threadpool(_session_detail, service.store, session_id)

    @app.get(
        "/v1/export/sessions",
        tags=["export"],
        summary="Every matching session, one row each, as CSV or JSON lines (export)",
        response_class=StreamingResponse,
        responses={
            200: {
                "description": "Rows as read, newest ended first; CSV cells that a spreadsheet "
                "would run as formulas start with a quote.",
                "content": {
                    "text/csv": {"schema": {"type": "string"}},
                    "application/x-ndjson": {"schema": {"type": "string"}},
                },
            },
            **_errors(400, 401, 403),
        },
    )
    async def export_sessions(
        token: Export,
        service: Service,
        filters: Filters,
        fmt: Annotated[Literal["csv", "jsonl"], Query(alias="format")] = "csv",
    ) -> StreamingResponse:
        # A sync iterator: Starlette reads it in the thread pool, one page of rows at a time.
        return StreamingResponse(
            (line.encode() for line in export.lines(service.store, filters, fmt)),
            media_type=export.MEDIA_TYPES[fmt],
            headers={"Content-Disposition": f'attachment; filename="sessions.{fmt}"'},
        )

    @app.get(
        "/v1/stats",
        response_model=StatsBody,
        tags=["stats"],
        summary="Done against delivered, over a range of days, optionally grouped",
        responses=_errors(400, 401, 403),
    )
    async def stats(
        token: Read,
        service: Service,
        day_from: Annotated[
            date | None, Query(alias="from", description="First day (UTC) the sessions ended.")
        ] = None,
        day_to: Annotated[
            date | None, Query(alias="to", description="Last day (UTC), included.")
        ] = None,
        group_by: GroupBy | None = None,
        agent: Filter = None,
        model: Annotated[
            str | None, Query(pattern=_NO_NUL, description="A model; empty for none.")
        ] = None,
        repo: Filter = None,
    ) -> StatsBody:
        """Rates are sums divided once; `delivered_rate` and `done_rate` count conclusive
        sessions only; `silent_failures` are done but not delivered."""
        result = await run_in_threadpool(
            service.store.stats,
            day_from=day_from,
            day_to=day_to,
            group_by=group_by,
            agent=agent,
            model=model,
            repo=repo,
        )
        overridden = await run_in_threadpool(
            lambda: overridden_count(
                service.store,
                day_from=day_from,
                day_to=day_to,
                agent=agent,
                model=model,
                repo=repo,
            )
        )
        return StatsBody(
            **_counts(result.totals),
            groups=[Group(key=g.key, **_counts(g.counts)) for g in result.groups],
            verdicts="computed",
            overridden=overridden,
        )

    @app.get(
        "/v1/rejected",
        response_model=RejectedPage,
        tags=["admin"],
        summary="Bodies that could not be read as a report (admin)",
        responses=_errors(400, 401, 403),
    )
    async def list_rejected(
        token: Admin,
        service: Service,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        before: Annotated[
            int | None, Query(ge=1, le=MAX_ID, description="next_before of the last page.")
        ] = None,
    ) -> RejectedPage:
        rows = await run_in_threadpool(service.store.rejected, limit=limit, before_id=before)
        return RejectedPage(
            rejected=[
                RejectedSummary(
                    id=r.id,
                    url=f"/v1/rejected/{r.id}",
                    received_at=r.received_at,
                    source=r.source,
                    field=r.field,
                    problem=r.problem,
                    report_sha256=r.report_sha256,
                    report_size=r.report_size,
                )
                for r in rows
            ],
            next_before=rows[-1].id if len(rows) == limit else None,
        )

    @app.get(
        "/v1/rejected/{rejected_id}",
        tags=["admin"],
        summary="The bytes of a rejected body, as kept (admin)",
        response_class=Response,
        responses={
            200: {
                "description": f"The bytes; of a body over the limit, its first {KEPT_BYTES}.",
                "content": {"application/octet-stream": {"schema": {"type": "string"}}},
            },
            **_errors(401, 403, 404),
        },
    )
    async def get_rejected(rejected_id: RowId, token: Admin, service: Service) -> Response:
        raw = await run_in_threadpool(service.store.rejected_bytes, rejected_id)
        return Response(raw, media_type="application/octet-stream")

    @app.get(
        "/metrics",
        tags=["operations"],
        summary="Prometheus metrics (read)",
        response_class=Response,
        responses={
            200: {
                "description": "The Prometheus text format.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
            **_errors(401, 403),
        },
    )
    async def metrics(token: Read, service: Service) -> Response:
        text = await run_in_threadpool(service.metrics.render)
        return Response(text, media_type=CONTENT_TYPE)

    @app.get("/healthz", response_model=Health, tags=["operations"], summary="Process alive")
    async def healthz() -> Health:
        return Health(status="ok", version=__version__)

    @app.get(
        "/readyz",
        response_model=Ready,
        tags=["operations"],
        summary="Database reachable, migrations at head, queue reachable",
        responses={503: {"model": NotReady}},
    )
    async def readyz(service: Service) -> Response:
        checks = await run_in_threadpool(_readiness, service)
        if all(v == "ok" for v in checks.values()):
            return JSONResponse(Ready(status="ready", checks=checks).model_dump())
        problems = "; ".join(f"{k}: {v}" for k, v in checks.items() if v != "ok")
        return _error(
            503, "not_ready", problems, headers={"Retry-After": RETRY_AFTER_S}, checks=checks
        )


# -- request bodies -------------------------------------------------------------------


async def _read_body(request: Request, limit: int) -> bytes | Oversized:
    """The body when it is at most `limit` bytes; otherwise what `pipeline.Oversized` keeps
    (a chunked body, or one longer than it said: the rest hashed and counted, never held)."""
    body = BoundedBody(limit)
    async for chunk in request.stream():
        body.add(chunk)
    return body.result()


def _submit(
    service: _Service, raw: bytes | Oversized, source: str, agent: str | None
) -> tuple[SessionRow, bool]:
    """The one call into the pipeline for a posted report (`agent`: the token's bound agent)."""
    # The pipeline queues a new session's verification, in the transaction that
    # stores it when the queue lives in the same database (PostgreSQL).
    return pipeline.submit(
        service.store,
        raw,
        source,
        max_report_bytes=service.config.max_report_bytes,
        queue=service.queue,
        config=service.config,
        bound_agent=agent,
    )


def _witness(service: _Service, session_id: str, body: bytes, agent: str | None) -> dict[str, Any]:
    """Witness posted entries and sign the receipt with the service's key (the evidence
    key, ``[evidence] signing_key``)."""
    from audit.dsse import fingerprint
    from audit.witness import Receipt, sign_receipt
    from verifier.app.evidence import load_key, public_raw
    from verifier.store import witness as witnessed

    entries = witnessed.parse_lines(body)
    # Without its key the service cannot sign a receipt: 503 before anything is kept.
    key = load_key(service.config.evidence.signing_key)
    count, head, at = witnessed.witness(service.store, session_id, entries, agent=agent)
    time = utc_text(at, timespec="microseconds")
    return sign_receipt(Receipt(session_id, count, head, time), key, fingerprint(public_raw(key)))


def _reverify(service: _Service, session_id: str, actor: str) -> None:
    assert service.queue is not None
    pipeline.reverify(service.store, session_id, service.queue, actor=actor)


def _readiness(service: _Service) -> dict[str, str]:
    checks: dict[str, str] = {}
    try:
        revision = schema_revision(service.store)
        checks["database"] = "ok"
        checks["migrations"] = (
            "ok"
            if revision == HEAD_REVISION
            else f"at {revision or 'no revision'}, this verifier needs {HEAD_REVISION}"
        )
    except InfrastructureError:
        checks["database"] = "cannot be reached"
        checks["migrations"] = "unknown (no database)"
    if service.queue is not None:
        try:
            checks["queue"] = service.queue.reachable() or "ok"
        except Exception as exc:  # a probe reports, it never raises
            log.warning("readyz: queue: %s", exc)
            checks["queue"] = "cannot be reached"
    return checks


# -- response bodies ------------------------------------------------------------------


def _session_url(session_id: str) -> str:
    return f"/v1/sessions/{session_id}"


def _summary(listed: Listed) -> SessionSummary:
    return SessionSummary(**_summary_fields(listed))


def _summary_fields(listed: Listed) -> dict[str, Any]:
    s = listed.session
    latest = listed.latest_run
    return {
        "session_id": s.session_id,
        "url": _session_url(s.session_id),
        "agent_status": s.status,
        "raw_agent_status": s.raw_status,
        "done": s.done,
        "delivery_status": s.delivery_status,
        "override_status": s.override_status,
        "effective_status": listed.effective_status,
        "verified_at": None if latest is None else latest.finished_at,
        "verdict_run_id": None if listed.verdict_run is None else listed.verdict_run.id,
        "latest_run_id": None if latest is None else latest.id,
        "agent": Agent(
            name=s.agent_name,
            version=s.agent_version,
            model=s.agent_model,
            tool_profile=s.tool_profile,
        ),
        "repo": Repo(
            name=s.repo_name,
            base_commit=s.base_commit,
            head_commit=s.head_commit,
            branch=s.branch,
        ),
        "started_at": s.started_at,
        "ended_at": s.ended_at,
        "ingested_at": s.ingested_at,
        "report_sha256": s.report_sha256,
    }


def _session_detail(store: Store, session_id: str) -> SessionDetail:
    listed = store.listed(session_id)
    runs = store.runs(session_id)
    shown = listed.verdict_run or listed.latest_run
    checks: dict[str, Any] = {} if shown is None else dict(shown.result.get("checks", {}))
    return SessionDetail(
        **_summary_fields(listed),
        checks=checks,
        runs=[_run_summary(r) for r in runs],
        overrides=[_override(o) for o in overrides(store, session_id)],
    )


def _override(row: OverrideRow) -> Override:
    return Override(id=row.id, at=row.at, author=row.author, status=row.status, reason=row.reason)


def _run_summary(run: RunRow) -> RunSummary:
    return RunSummary(
        id=run.id,
        delivery_status=run.delivery_status.value,
        verified_at=run.finished_at,
        started_at=run.started_at,
        duration_s=run.duration_s,
        verifier_version=run.verifier_version,
        # Why the run happened: cli, ingest, reverify, retry, recheck.
        reason=run.reason,
        checks={name: status.value for name, status in run.checks.items()},
    )


def _counts(counts: StoreCounts) -> dict[str, Any]:
    return counts.to_dict()


# -- the OpenAPI document ----------------------------------------------------------------


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, with the report's JSON Schema as the body of ``POST /v1/sessions``."""
    if app.openapi_schema:
        return app.openapi_schema
    document = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            # Parameters that do not validate are our 400 in the error shape, not FastAPI's 422.
            responses = operation.get("responses", {})
            if responses.pop("422", None) is not None:
                responses.setdefault("400", _ERROR_RESPONSE)
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    report = json.loads(REPORT_SCHEMA.read_text(encoding="utf-8"))
    definitions = report.pop("$defs", {})
    for key in ("$schema", "$id"):
        report.pop(key, None)
    schemas["SessionReport"] = _rebase(report)
    for name, schema in definitions.items():
        schemas[f"SessionReport{name}"] = _rebase(schema)
    app.openapi_schema = document
    return document


_ERROR_RESPONSE = {
    "description": "Bad request: the field or parameter named is not valid.",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
}


def _rebase(node: Any) -> Any:
    """The report schema's ``#/$defs/X`` references, pointed at the OpenAPI components."""
    if isinstance(node, dict):
        return {
            k: (
                "#/components/schemas/SessionReport" + v.removeprefix("#/$defs/")
                if k == "$ref" and isinstance(v, str) and v.startswith("#/$defs/")
                else _rebase(v)
            )
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_rebase(v) for v in node]
    return node
