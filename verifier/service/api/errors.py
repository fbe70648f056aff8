"""Every refusal of the API in the one shape, ``{"error": {"code", "field", "problem"}}``.

A `VerifierError` answers with its class's own `http_status` and `code`
(`verifier.errors` lists them), found by one lookup; what cannot be reached (the
store, the queue, the pool) is a ``503`` with ``Retry-After``, whose detail goes to
the log and never to a client.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException

from verifier.errors import InfrastructureError, VerifierError
from verifier.service.api.bodies import ErrorBody

log = logging.getLogger("verifier.api")

RETRY_AFTER_S = "5"


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI entries of the refusals an endpoint may answer."""
    return {status: {"model": ErrorBody} for status in statuses}


def error(
    status: int,
    code: str,
    problem: str,
    field: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    """A refusal in the one shape; `extra` keys go beside ``error``."""
    body = {"error": {"code": code, "field": field, "problem": problem}, **extra}
    return JSONResponse(body, status_code=status, headers=headers)


class Refused(Exception):
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
    assert isinstance(exc, Refused)
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return error(exc.status, exc.code, exc.problem, exc.field, headers=headers)


_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "bad_request" if exc.status_code < 500 else "error")
    headers = dict(exc.headers) if exc.headers else None
    return error(exc.status_code, code, str(exc.detail), headers=headers)


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0]
    loc = [str(part) for part in first.get("loc", ())]
    field = loc[-1] if loc else None
    problem = str(first.get("msg", "is not valid"))
    if "input" in first and first.get("type") != "missing":
        problem = f"{problem} (got {first['input']!r})"
    return error(400, "bad_request", problem, field)


async def _on_verifier_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, VerifierError)
    if exc.http_status >= 500:
        # The server's own state (its configuration, a stop): the detail is for its operator.
        log.error("%s %s: %s", request.method, request.url.path, exc)
        return error(
            exc.http_status, exc.code, f"the service cannot answer ({exc.code}): see its log"
        )
    return error(exc.http_status, exc.code, exc.problem_text(), exc.field, **exc.extra())


async def _on_unavailable(request: Request, exc: Exception) -> Response:
    # The detail (which host, which error) goes to the log, not to any client.
    log.warning("%s %s: unavailable: %s", request.method, request.url.path, exc)
    return error(
        503,
        "unavailable",
        "the database or the job queue cannot be reached; retry later",
        headers={"Retry-After": RETRY_AFTER_S},
    )


async def _on_bug(request: Request, exc: Exception) -> Response:
    log.exception("%s %s: internal error", request.method, request.url.path)
    return error(500, "internal", "internal error (a bug): see the service's log")


# Each class and its handler; Starlette picks the one of the nearest class in the MRO.
# An InfrastructureError is the same outage as the pool's own errors, and answered alike.
_HANDLERS: dict[type[Exception], Any] = {
    Refused: _on_refused,
    HTTPException: _on_http_exception,
    RequestValidationError: _on_validation_error,
    VerifierError: _on_verifier_error,
    **{
        unreachable: _on_unavailable
        for unreachable in (InfrastructureError, OperationalError, InterfaceError, PoolTimeout)
    },
    Exception: _on_bug,
}


def install(app: FastAPI) -> None:
    """Register the handlers."""
    for exc_class, handler in _HANDLERS.items():
        app.add_exception_handler(exc_class, handler)


async def handle(request: Request, exc: Exception) -> Response:
    """The answer the installed handlers give `exc`, for a route served without
    FastAPI's machinery (`routers.sessions.post_session_direct`): the nearest class in its MRO."""
    for cls in type(exc).__mro__:
        if cls in _HANDLERS:
            response: Response = await _HANDLERS[cls](request, exc)
            return response
    raise exc  # not an Exception (a cancellation): nobody answers it
