"""The bodies that could not be read as a report, kept for an admin to look at."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from verifier.app.pipeline import KEPT_BYTES
from verifier.service.api.bodies import MAX_ID, MAX_PAGE, RejectedPage, RejectedSummary, RowId
from verifier.service.api.deps import Admin, Service
from verifier.service.api.errors import responses

router = APIRouter()


@router.get(
    "/v1/rejected",
    response_model=RejectedPage,
    tags=["admin"],
    summary="Bodies that could not be read as a report (admin)",
    responses=responses(400, 401, 403),
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


@router.get(
    "/v1/rejected/{rejected_id}",
    tags=["admin"],
    summary="The bytes of a rejected body, as kept (admin)",
    response_class=Response,
    responses={
        200: {
            "description": f"The bytes; of a body over the limit, its first {KEPT_BYTES}.",
            "content": {"application/octet-stream": {"schema": {"type": "string"}}},
        },
        **responses(401, 403, 404),
    },
)
async def get_rejected(rejected_id: RowId, token: Admin, service: Service) -> Response:
    raw = await run_in_threadpool(service.store.rejected_bytes, rejected_id)
    return Response(raw, media_type="application/octet-stream")
