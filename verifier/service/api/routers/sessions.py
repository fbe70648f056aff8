"""The sessions: submit a report, witness its trail, read, list, verify again, override."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from verifier.app.pipeline import Oversized
from verifier.errors import InvalidReport
from verifier.service.api import calls, deps, views
from verifier.service.api.bodies import (
    MAX_PAGE,
    Accepted,
    ErrorBody,
    OverrideRequest,
    Reverify,
    SessionDetail,
    SessionId,
    SessionPage,
    SignedReceipt,
)
from verifier.service.api.deps import Admin, Filters, Ingest, Read, Service, ServiceState
from verifier.service.api.errors import Refused, error, handle, responses
from verifier.store.overrides import record_override
from verifier.store.tokens import TokenRow

router = APIRouter()


@router.post(
    "/v1/sessions",
    status_code=202,
    response_model=Accepted,
    tags=["sessions"],
    summary="Submit a session report",
    responses={
        200: {"model": SessionDetail, "description": "Already stored with these bytes."},
        **responses(400, 401, 403, 409, 413),
        422: {
            "model": ErrorBody,
            "description": "The report names a task (task_id) the operator has not declared, "
            "or declared for another repository (unknown_task): nothing is stored.",
        },
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
    with these bytes, 409 when its session id is stored with other bytes, 422 when it
    names a task nobody declared."""
    return await submit_report(request, token, service)


async def post_session_direct(scope: Scope, receive: Receive, send: Send) -> None:
    """``POST /v1/sessions`` without FastAPI's machinery (its middleware stack, routing and
    dependency solving, about 0.3 ms of CPU a post: docs/benchmarks.md): the same
    token check, the same work (`submit_report`), and any error answered by the same
    handlers (`errors.handle`). The app calls it for exactly this method and path;
    the route above stays for the OpenAPI document and everything else."""
    request = Request(scope, receive, send)
    try:
        token = await deps.ingest_token(request, await deps.bearer(request))
        response = await submit_report(request, token, deps.state(request))
    except Exception as exc:
        response = await handle(request, exc)
    await response(scope, receive, send)


async def submit_report(request: Request, token: TokenRow, service: ServiceState) -> Response:
    """The work of `post_session`, once the token is checked."""
    limit = service.config.max_report_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return error(
            413,
            "too_large",
            f"report is {declared} bytes, over the limit of {limit} bytes",
            "$",
            headers={"Connection": "close"},
        )
    raw = await calls.read_body(request, limit)
    try:
        session, created = await run_in_threadpool(
            calls.submit, service, raw, f"api:token:{token.name}", token.agent
        )
    except InvalidReport as exc:
        if isinstance(raw, Oversized):
            return error(413, "too_large", exc.problem, exc.field)
        raise
    if created:
        url = views.session_url(session.session_id)
        body = Accepted(session_id=session.session_id, status="pending", url=url)
        return JSONResponse(body.model_dump(mode="json"), status_code=202)
    detail = await run_in_threadpool(views.session_detail, service.store, session.session_id)
    return JSONResponse(detail.model_dump(mode="json"), status_code=200)


@router.post(
    "/v1/sessions/{session_id}/trail",
    response_model=SignedReceipt,
    tags=["sessions"],
    summary="Witness trail entries as the recorder writes them (ingest)",
    responses=responses(400, 401, 403, 409, 413, 503),
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
    raw = await calls.read_body(request, service.config.max_report_bytes)
    if isinstance(raw, Oversized):
        return error(413, "too_large", raw.error().problem, "entries")
    signed = await run_in_threadpool(calls.witness, service, session_id, raw, token.agent)
    return JSONResponse(SignedReceipt.model_validate(signed).model_dump(mode="json"))


@router.get(
    "/v1/sessions/{session_id}",
    response_model=SessionDetail,
    tags=["sessions"],
    summary="A session, its verdict and its runs",
    responses=responses(401, 403, 404),
)
async def get_session(session_id: SessionId, token: Read, service: Service) -> SessionDetail:
    return await run_in_threadpool(views.session_detail, service.store, session_id)


@router.get(
    "/v1/sessions",
    response_model=SessionPage,
    tags=["sessions"],
    summary="Sessions, newest ended first, filtered, a page at a time",
    responses=responses(400, 401, 403),
)
async def list_sessions(
    token: Read,
    service: Service,
    filters: Filters,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page.")] = None,
) -> SessionPage:
    page = await run_in_threadpool(service.store.find_sessions, filters, limit=limit, cursor=cursor)
    return SessionPage(
        sessions=[views.summary(listed) for listed in page.items], next_cursor=page.next_cursor
    )


@router.post(
    "/v1/sessions/{session_id}/verify",
    status_code=202,
    response_model=Reverify,
    tags=["sessions"],
    summary="Verify a session again (admin)",
    responses=responses(401, 403, 404, 410, 503),
)
async def reverify(session_id: SessionId, token: Admin, service: Service) -> Reverify:
    """Queue a new verification; the act goes into the admin log first."""
    if service.queue is None:
        problem = "re-verification needs a job queue: this API was started without one"
        raise Refused(503, "unavailable", problem)
    await run_in_threadpool(calls.reverify, service, session_id, f"token:{token.name}")
    return Reverify(session_id=session_id, status="queued", url=views.session_url(session_id))


@router.post(
    "/v1/sessions/{session_id}/override",
    response_model=SessionDetail,
    tags=["sessions"],
    summary="Override a session's verdict, beside the computed one (admin)",
    responses=responses(400, 401, 403, 404),
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
    return await run_in_threadpool(views.session_detail, service.store, session_id)
