"""Who may call what: every endpoint × every scope, no token, and tokens that no longer work."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.support.api import RecordingQueue, bearer, make_config
from tests.support.report_factory import make_report_bytes
from verifier.service.api import create_app
from verifier.store import Store
from verifier.store.tokens import SCOPES, create_token, new_token, revoke_token

# (method, path, the scope it needs, what it answers when allowed); None: no token needed.
ENDPOINTS = [
    ("POST", "/v1/sessions", "ingest", 202),
    ("GET", "/v1/sessions", "read", 200),
    ("GET", "/v1/sessions/s-known", "read", 200),
    ("POST", "/v1/sessions/s-known/verify", "admin", 202),
    ("POST", "/v1/sessions/s-known/override", "admin", 200),
    ("GET", "/v1/export/sessions", "export", 200),
    ("POST", "/v1/sessions/s-known/trail", "ingest", 400),  # no entries: read before the key
    ("GET", "/v1/stats", "read", 200),
    ("POST", "/v1/tasks", "admin", 201),
    ("GET", "/v1/tasks", "read", 200),
    ("GET", "/v1/tasks/t-known", "read", 200),
    ("GET", "/metrics", "read", 200),
    ("GET", "/v1/rejected", "admin", 200),
    ("GET", "/v1/rejected/1", "admin", 200),
    ("GET", "/healthz", None, 200),
    ("GET", "/readyz", None, 200),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """One app for the whole matrix: a known session, a rejected body, tokens of every kind."""
    url = f"sqlite:///{Path(tmp_path_factory.mktemp('scopes')) / 'api.sqlite3'}"
    secrets: dict[str, str] = {}
    with Store.open(url) as store:
        for scope in SCOPES:
            secrets[scope] = create_token(store, name=scope, scope=scope, actor="test")[1]
        secrets["expired"] = create_token(
            store,
            name="expired",
            scope="admin",
            actor="test",
            expires_at=datetime.now(UTC) - timedelta(days=1),
        )[1]
        revoked, secrets["revoked"] = create_token(store, name="gone", scope="admin", actor="test")
        revoke_token(store, revoked.id, actor="test")
    secrets["unknown"] = new_token()
    secrets["malformed"] = "not-a-token"
    with TestClient(create_app(make_config(url), RecordingQueue())) as client:
        admin = bearer(secrets["admin"])
        assert (
            client.post(
                "/v1/sessions", content=make_report_bytes("s-known"), headers=admin
            ).status_code
            == 202
        )
        assert client.post("/v1/sessions", content=b"nope", headers=admin).status_code == 400
        known = {"task_id": "t-known", "read_only": True}
        assert client.post("/v1/tasks", json=known, headers=admin).status_code == 201
        yield client, secrets


def call(client: TestClient, method: str, path: str, headers: dict[str, str]) -> int:
    # Every POST /v1/sessions is a new report, so an allowed one is always a 202.
    body = make_report_bytes(f"s-{new_token()[4:16]}") if path == "/v1/sessions" else None
    if path == "/v1/tasks" and method == "POST":  # a new task each time: always a 201
        body = f'{{"task_id": "t-{new_token()[4:16]}", "read_only": true}}'.encode()
        headers = {**headers, "Content-Type": "application/json"}
    if path.endswith("/override"):
        body = b'{"status": "cleared", "reason": "scopes"}'
        headers = {**headers, "Content-Type": "application/json"}
    return client.request(method, path, content=body, headers=headers).status_code


@pytest.mark.parametrize(("method", "path", "needed", "allowed"), ENDPOINTS)
@pytest.mark.parametrize("scope", SCOPES)
def test_each_scope_reaches_its_endpoints_and_only_those(
    world: tuple[TestClient, dict[str, str]],
    method: str,
    path: str,
    needed: str | None,
    allowed: int,
    scope: str,
) -> None:
    client, secrets = world
    permitted = needed is None or scope == "admin" or scope == needed
    status = call(client, method, path, bearer(secrets[scope]))
    assert status == (allowed if permitted else 403)


@pytest.mark.parametrize(("method", "path", "needed", "allowed"), ENDPOINTS)
@pytest.mark.parametrize("kind", ["none", "unknown", "malformed", "expired", "revoked", "basic"])
def test_without_a_working_token_only_the_probes_answer(
    world: tuple[TestClient, dict[str, str]],
    method: str,
    path: str,
    needed: str | None,
    allowed: int,
    kind: str,
) -> None:
    client, secrets = world
    if kind == "none":
        headers = {}
    elif kind == "basic":
        headers = {"Authorization": f"Basic {secrets['admin']}"}
    else:
        headers = bearer(secrets[kind])
    status = call(client, method, path, headers)
    if needed is None:
        assert status == allowed
        return
    assert status == 401
    response = client.request(method, path, headers=headers)
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"]["field"] == "Authorization"


def test_a_wrong_scope_says_which_scope_is_needed(world: tuple[TestClient, dict[str, str]]) -> None:
    client, secrets = world
    response = client.get("/v1/stats", headers=bearer(secrets["ingest"]))
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "forbidden"
    assert "'ingest'" in error["problem"] and "'read'" in error["problem"]


def test_an_expired_or_revoked_token_is_told_so(world: tuple[TestClient, dict[str, str]]) -> None:
    client, secrets = world
    expired = client.get("/v1/stats", headers=bearer(secrets["expired"])).json()["error"]
    revoked = client.get("/v1/stats", headers=bearer(secrets["revoked"])).json()["error"]
    assert "expired" in expired["problem"] and "revoked" in revoked["problem"]
