"""What is read across sessions: the export and the stats."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from verifier.app import export
from verifier.service.api import views
from verifier.service.api.bodies import NO_NUL, Filter, GroupBody, GroupBy, StatsBody
from verifier.service.api.deps import Export, Filters, Read, Service
from verifier.service.api.errors import responses
from verifier.store.overrides import overridden_count
from verifier.store.stats import bounds

router = APIRouter()


@router.get(
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
        **responses(400, 401, 403),
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


@router.get(
    "/v1/stats",
    response_model=StatsBody,
    tags=["stats"],
    summary="Done against delivered, over a span of time, optionally grouped",
    responses=responses(400, 401, 403),
)
async def stats(
    token: Read,
    service: Service,
    first: Annotated[
        str | None,
        Query(
            alias="from",
            pattern=NO_NUL,
            description="Sessions that ended at or after: a date (its midnight UTC) or an "
            "ISO 8601 date and time with its offset (`Z`, `+02:00`).",
        ),
    ] = None,
    last: Annotated[
        str | None,
        Query(
            alias="to",
            pattern=NO_NUL,
            description="A date: the last day (UTC) the sessions ended, included. An ISO "
            "8601 date and time with its offset: the moment they ended before.",
        ),
    ] = None,
    group_by: GroupBy | None = None,
    agent: Filter = None,
    model: Annotated[
        str | None, Query(pattern=NO_NUL, description="A model; empty for none.")
    ] = None,
    repo: Filter = None,
) -> StatsBody:
    """Rates are sums divided once; `delivered_rate` and `done_rate` count conclusive
    sessions only; `silent_failures` are done but not delivered. Days and weeks are UTC:
    a span that starts or ends within a day counts that day's sessions of the span."""
    ended_from, ended_to = bounds(first, last)
    result = await run_in_threadpool(
        service.store.stats,
        ended_from=ended_from,
        ended_to=ended_to,
        group_by=group_by,
        agent=agent,
        model=model,
        repo=repo,
    )
    overridden = await run_in_threadpool(
        lambda: overridden_count(
            service.store,
            ended_from=ended_from,
            ended_to=ended_to,
            agent=agent,
            model=model,
            repo=repo,
        )
    )
    return StatsBody(
        **views.counts(result.totals),
        groups=[GroupBody(key=g.key, **views.counts(g.counts)) for g in result.groups],
        verdicts="computed",
        overridden=overridden,
    )
