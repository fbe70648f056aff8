"""Tokens in the service: which scope may do what, why a token is refused (401 or 403);
and the `verifier token` commands, run as real subprocesses. The tokens themselves (their
format, their hash, their state, the admin log) are tested in tests/store/test_tokens.py."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from tests.support.api import bearer, make_config
from verifier.service import auth
from verifier.service.api import create_app
from verifier.store import Store
from verifier.store.tokens import SCOPES, admin_log, create_token, revoke_token, well_formed

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_the_policy_admin_does_all_and_others_their_own_scope() -> None:
    assert all(auth.allows("admin", needed) for needed in SCOPES)
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
    # The token's own rule (`TokenRow.state`) decides: it has expired at its very moment.
    assert auth.refusal(row, "read", NOW + timedelta(days=1)) == auth.Refusal(
        401, "token 'ci' expired at 2026-12-01T12:00:00+00:00"
    )
    gone = auth.refusal(revoked, "read", NOW)
    assert gone is not None and gone.status == 401 and "revoked" in gone.problem
    assert auth.refusal(None, "read", NOW) == auth.Refusal(401, "unknown token")


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
    assert well_formed(secret) and data["scope"] == "read" and data["expires_at"] is None

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
    assert well_formed(created.stdout.strip())
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
