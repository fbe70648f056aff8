"""What a route is given rather than fetches: the service's state, the caller's token, filters.

The store is opened once, by the app's lifespan, and shared through `Service`; no
route opens it or reads the configuration itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import Field

from verifier.config import Config
from verifier.service import auth
from verifier.service.api.bodies import MAX_SEARCH, NO_NUL, DeliveryStatus, Filter, Moment
from verifier.service.api.errors import Refused
from verifier.service.metrics import Metrics
from verifier.store import SessionFilter, Store
from verifier.store.queue import Queue
from verifier.store.tokens import TokenRow, authenticate


@dataclass
class ServiceState:
    """What the routes share: the configuration, the open store, the queue, the metrics."""

    config: Config
    store: Store
    queue: Queue | None
    metrics: Metrics


def _state(request: Request) -> ServiceState:
    service: ServiceState = request.app.state.service
    return service


async def _service(request: Request) -> ServiceState:
    # async: FastAPI runs a plain function dependency in the thread pool, a hop per request.
    return _state(request)


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
            raise Refused(401, "unauthorized", problem, "Authorization")
        store = _state(request).store
        token = await run_in_threadpool(authenticate, store, credentials.credentials)
        refused = auth.refusal(token, scope, datetime.now(UTC))
        if refused is not None:
            code = "unauthorized" if refused.status == 401 else "forbidden"
            raise Refused(refused.status, code, refused.problem, "Authorization")
        assert token is not None
        return token

    return check


# The ingest route's check, also called directly by the route served without FastAPI's
# machinery (`routers.sessions.post_session_direct`), with `bearer`'s credentials.
ingest_token = _require("ingest")
bearer = _bearer
state = _state
Ingest = Annotated[TokenRow, Depends(ingest_token)]
Read = Annotated[TokenRow, Depends(_require("read"))]
Admin = Annotated[TokenRow, Depends(_require("admin"))]
Export = Annotated[TokenRow, Depends(_require("export"))]
Service = Annotated[ServiceState, Depends(_service)]


def _filters(
    agent: Filter = None,
    model: Filter = None,
    repo: Filter = None,
    agent_status: Filter = None,
    done: bool | None = None,
    delivery_status: DeliveryStatus | None = None,
    head_commit: Annotated[
        list[Annotated[str, Field(pattern=NO_NUL)]] | None,
        Query(description="A head commit; repeat for any of several (a merge gate's range)."),
    ] = None,
    branch: Filter = None,
    ended_from: Annotated[
        Moment | None,
        Query(
            alias="from",
            description="Sessions that ended at or after: a date (its midnight UTC) or an "
            "ISO 8601 date and time with its offset.",
        ),
    ] = None,
    ended_to: Annotated[
        Moment | None,
        Query(
            alias="to",
            description="Sessions that ended before: a date (its midnight UTC) or an "
            "ISO 8601 date and time with its offset.",
        ),
    ] = None,
    q: Annotated[
        str | None,
        Query(
            max_length=MAX_SEARCH,
            pattern=NO_NUL,
            description="Search: part of the session id or branch (any case), or the "
            "start of the head or base commit.",
        ),
    ] = None,
    task: Annotated[
        str | None,
        Query(pattern=NO_NUL, description="The task the report names (`task_id`)."),
    ] = None,
    check: Annotated[
        str | None,
        Query(
            pattern=NO_NUL,
            description="Sessions whose shown run (the verdict run, else the latest) has a "
            "finding of this check (changes, tests, audit, replay).",
        ),
    ] = None,
    code: Annotated[
        str | None,
        Query(
            pattern=NO_NUL,
            description="With `check`: only findings of this code (`change.missing`).",
        ),
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
        search=q or None,
        task=task or None,
        check=check or None,
        code=code or None,
    )


Filters = Annotated[SessionFilter, Depends(_filters)]
