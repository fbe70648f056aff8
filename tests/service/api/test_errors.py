"""Each error of the verifier answers its own class's status and code, found by one lookup."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI, Request, Response
from fastapi.testclient import TestClient
from sqlalchemy.exc import OperationalError

from verifier.errors import (
    BadRequest,
    ConfigError,
    Forbidden,
    InfrastructureError,
    InvalidReport,
    LostJob,
    NotFound,
    ReportPruned,
    SessionConflict,
    VerifierError,
    WitnessConflict,
)
from verifier.service.api import errors
from verifier.store.engine import NoStore


def _answer(exc: VerifierError) -> tuple[int, dict[str, Any]]:
    app = FastAPI()
    errors.install(app)

    @app.get("/raise")
    async def raise_it() -> None:
        raise exc

    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.get("/raise")
    return answer.status_code, answer.json()


@pytest.mark.parametrize(
    "exc",
    [
        InvalidReport("repo.name", "is missing"),
        BadRequest("cursor", "is not a cursor"),
        Forbidden("agent.name", "is bound to another agent"),
        NotFound("no session 's-1'"),
        NoStore("no database yet"),
        ReportPruned("s-1", None),
        SessionConflict("s-1", "a" * 64, "b" * 64),
        WitnessConflict(2, "does not extend the chain"),
        LostJob("job 3 went to another worker"),
    ],
    ids=lambda exc: type(exc).__name__,
)
def test_a_refusal_answers_its_class_status_code_field_and_problem(exc: VerifierError) -> None:
    status, body = _answer(exc)
    assert status == type(exc).http_status
    assert body["error"] == {
        "code": type(exc).code,
        "field": exc.field,
        "problem": exc.problem_text(),
    }
    assert {k: v for k, v in body.items() if k != "error"} == exc.extra()


def test_a_witness_conflict_names_its_entries_and_first_bad_index() -> None:
    status, body = _answer(WitnessConflict(2, "does not extend the chain"))
    assert status == 409 and body["index"] == 2
    assert body["error"] == {
        "code": "witness_conflict",
        "field": "entries",
        "problem": "entry 2: does not extend the chain",
    }


def test_the_server_s_own_failure_keeps_its_detail_for_the_log() -> None:
    status, body = _answer(ConfigError("signing key /secret/key.pem is missing"))
    assert status == 503 and body["error"]["code"] == "config"
    assert "/secret" not in str(body)


@pytest.mark.parametrize(
    "exc",
    [
        InvalidReport("repo.name", "is missing"),
        SessionConflict("s-1", "a" * 64, "b" * 64),
        ConfigError("signing key /secret/key.pem is missing"),
        errors.Refused(401, "unauthorized", "no token", "Authorization"),
        InfrastructureError("database sqlite:///x cannot be used: disk I/O error"),
        OperationalError("INSERT", {}, Exception("database is locked")),
        RuntimeError("a bug"),
    ],
    ids=lambda exc: type(exc).__name__,
)
def test_the_direct_route_s_handler_answers_as_the_installed_handlers_do(exc: Exception) -> None:
    # `POST /v1/sessions` is answered outside FastAPI's machinery (errors.handle): the same
    # status, headers and body as the handlers FastAPI runs for every other route.
    app = FastAPI()
    errors.install(app)

    @app.get("/raise")
    async def raise_it() -> None:
        raise exc

    @app.get("/handle")
    async def handle_it(request: Request) -> Response:
        return await errors.handle(request, exc)

    with TestClient(app, raise_server_exceptions=False) as client:
        installed, direct = client.get("/raise"), client.get("/handle")
    assert direct.status_code == installed.status_code
    assert direct.json() == installed.json()
    for header in ("www-authenticate", "retry-after"):
        assert direct.headers.get(header) == installed.headers.get(header)
