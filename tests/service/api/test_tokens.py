"""Tokens: their format, only their hash stored, revocation, expiry, the admin log;
and the `verifier token` commands, run as real subprocesses."""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from tests.support.api import bearer, make_config
from verifier.errors import BadRequest, NotFound
from verifier.service import auth
from verifier.service.api import create_app
from verifier.store import Store
from verifier.store.tokens import (
    admin_log,
    authenticate,
    create_token,
    list_tokens,
    log_admin,
    revoke_token,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_a_token_is_vrf_and_256_random_bits() -> None:
    first, second = auth.new_token(), auth.new_token()
    assert first != second
    assert first.startswith("vrf_") and len(first) == 47
    assert auth.well_formed(first) and not auth.well_formed(first[:-1])
    assert not auth.well_formed("vrf_" + "!" * 43)


def test_only_the_hash_of_a_token_is_stored(db_url: str) -> None:
    with Store.open(db_url) as store:
        row, secret = create_token(store, name="ci", scope="ingest", actor="test")
    engine = create_engine(db_url)
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT * FROM api_tokens")).mappings().all()
    engine.dispose()
    assert len(rows) == 1
    assert rows[0]["token_sha256"] == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in json.dumps([dict(r) for r in rows], default=str)
    assert row.scope == "ingest" and row.created_by == "test"


def test_a_secret_authenticates_its_own_token_and_nothing_else(db_url: str) -> None:
    with Store.open(db_url) as store:
        row, secret = create_token(store, name="ci", scope="read", actor="test")
        assert authenticate(store, secret) == row
        assert authenticate(store, auth.new_token()) is None
        assert authenticate(store, "not a token") is None


def test_the_policy_admin_does_all_and_others_their_own_scope() -> None:
    assert all(auth.allows("admin", needed) for needed in auth.SCOPES)
    assert auth.allows("read", "read") and not auth.allows("read", "ingest")
    assert not auth.allows("export", "read") and not auth.allows("ingest", "admin")


def test_expiry_and_revocation_refuse_with_401_and_a_scope_mismatch_with_403(
    db_url: str,
) -> None:
    with Store.open(db_url) as store:
        row, _ = create_token(
            store, name="ci", scope="read", actor="test", expires_at=NOW + timedelta(days=1)
        )
        revoked, _ = revoke_token(store, row.id, actor="test")
    assert auth.refusal(row, "read", NOW) is None
    assert auth.refusal(row, "admin", NOW) == auth.Refusal(
        403, "token 'ci' has scope 'read'; this needs scope 'admin'"
    )
    expired = auth.refusal(row, "read", NOW + timedelta(days=2))
    assert expired is not None and expired.status == 401 and "expired" in expired.problem
    gone = auth.refusal(revoked, "read", NOW)
    assert gone is not None and gone.status == 401 and "revoked" in gone.problem
    assert auth.refusal(None, "read", NOW) == auth.Refusal(401, "unknown token")


def test_creation_and_revocation_are_logged_once_each(db_url: str) -> None:
    with Store.open(db_url) as store:
        row, _ = create_token(store, name="ci", scope="admin", actor="cli:alice")
        assert revoke_token(store, row.id, actor="cli:bob")[1] is True
        again, changed = revoke_token(store, row.id, actor="cli:bob")
        assert changed is False and again.revoked_at is not None
        entries = admin_log(store)
        assert [(e.actor, e.action, e.subject) for e in entries] == [
            ("cli:bob", "token.revoke", str(row.id)),
            ("cli:alice", "token.create", str(row.id)),
        ]
        assert entries[1].detail == {"name": "ci", "scope": "admin"}
        assert [t.state(datetime.now(UTC)) for t in list_tokens(store)] == ["revoked"]
        with pytest.raises(NotFound, match="no token with id 999"):
            revoke_token(store, 999, actor="cli:bob")


def test_the_admin_log_cannot_be_rewritten(db_url: str) -> None:
    with Store.open(db_url) as store:
        log_admin(store, actor="token:ops", action="session.reverify", subject="s-1")
    engine = create_engine(db_url)
    try:
        for statement in ("UPDATE admin_log SET actor = 'someone else'", "DELETE FROM admin_log"):
            with pytest.raises(DBAPIError, match="append-only"), engine.begin() as connection:
                connection.execute(text(statement))
    finally:
        engine.dispose()
    with Store.open(db_url) as store:
        assert [e.actor for e in admin_log(store)] == ["token:ops"]


@pytest.mark.parametrize(
    ("name", "scope", "field"), [("ci", "root", "scope"), (" ", "read", "name")]
)
def test_a_bad_scope_or_name_names_the_field(
    db_url: str, name: str, scope: str, field: str
) -> None:
    with Store.open(db_url) as store, pytest.raises(BadRequest) as caught:
        create_token(store, name=name, scope=scope, actor="test")
    assert caught.value.field == field


# -- the command line -------------------------------------------------------------------


def verifier(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifier", "token", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "VERIFIER_DATABASE_URL": url},
        timeout=120,
        check=False,
    )


def test_token_commands_create_list_and_revoke_a_working_token(sqlite_url: str) -> None:
    created = verifier(
        "create", "--scope", "read", "--name", "dash", "--format", "json", url=sqlite_url
    )
    assert created.returncode == 0, created.stderr
    data = json.loads(created.stdout)
    secret = data["token"]
    assert auth.well_formed(secret) and data["scope"] == "read" and data["expires_at"] is None

    listed = verifier("list", "--format", "json", url=sqlite_url)
    assert listed.returncode == 0 and secret not in listed.stdout
    (row,) = json.loads(listed.stdout)["tokens"]
    assert (row["name"], row["scope"], row["state"]) == ("dash", "read", "active")

    with TestClient(create_app(make_config(sqlite_url))) as client:
        assert client.get("/v1/stats", headers=bearer(secret)).status_code == 200
        revoked = verifier("revoke", str(row["id"]), url=sqlite_url)
        assert revoked.returncode == 0 and "revoked" in revoked.stdout
        assert client.get("/v1/stats", headers=bearer(secret)).status_code == 401

    with Store.open(sqlite_url) as store:
        actors = [(e.actor, e.action) for e in admin_log(store)]
    me = f"cli:{getpass.getuser()}"
    assert actors == [(me, "token.revoke"), (me, "token.create")]


def test_token_create_prints_the_token_alone_on_stdout(sqlite_url: str) -> None:
    created = verifier(
        "create",
        "--scope",
        "ingest",
        "--name",
        "harness",
        "--expires",
        "2099-01-01",
        url=sqlite_url,
    )
    assert created.returncode == 0, created.stderr
    assert auth.well_formed(created.stdout.strip())
    assert "shown this once" in created.stderr and "2099-01-01T00:00:00Z" in created.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["create", "--scope", "root", "--name", "x"], "--scope"),
        (["create", "--scope", "read", "--name", "x", "--expires", "2001-01-01"], "in the past"),
        (["create", "--scope", "read", "--name", "x", "--expires", "soon"], "--expires"),
        (["revoke", "42"], "no token with id 42"),
    ],
)
def test_token_command_mistakes_exit_2_naming_them(
    sqlite_url: str, args: list[str], expected: str
) -> None:
    done = verifier(*args, url=sqlite_url)
    assert done.returncode == 2 and expected in done.stderr
