"""Tokens in the store: their format, only their hash stored, their state, revocation and
the admin log, on real SQLite files and the real PostgreSQL server."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from verifier.errors import BadRequest, NotFound
from verifier.store import Store
from verifier.store.tokens import (
    TokenRow,
    admin_log,
    authenticate,
    create_token,
    list_tokens,
    log_admin,
    new_token,
    revoke_token,
    same_hash,
    well_formed,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def token_row(
    *, expires_at: datetime | None = None, revoked_at: datetime | None = None
) -> TokenRow:
    return TokenRow(
        id=1,
        name="ci",
        scope="read",
        created_at=NOW - timedelta(days=1),
        created_by="test",
        expires_at=expires_at,
        revoked_at=revoked_at,
    )


def test_a_token_is_vrf_and_256_random_bits() -> None:
    first, second = new_token(), new_token()
    assert first != second
    assert first.startswith("vrf_") and len(first) == 47
    assert well_formed(first) and not well_formed(first[:-1])
    assert not well_formed("vrf_" + "!" * 43)


def test_token_hashes_are_the_same_only_when_equal() -> None:
    digest = hashlib.sha256(b"vrf_x").hexdigest()
    assert same_hash(digest, digest)
    assert not same_hash(digest, digest[:-1] + ("0" if digest[-1] != "0" else "1"))
    assert not same_hash(digest, digest[:-1])


def test_a_token_expires_at_its_moment_and_a_revoked_one_stays_revoked() -> None:
    assert token_row().state(NOW) == "active"
    assert token_row(expires_at=NOW + timedelta(seconds=1)).state(NOW) == "active"
    assert token_row(expires_at=NOW).state(NOW) == "expired"
    assert token_row(expires_at=NOW - timedelta(days=1)).state(NOW) == "expired"
    assert token_row(revoked_at=NOW).state(NOW) == "revoked"
    both = token_row(expires_at=NOW - timedelta(days=1), revoked_at=NOW - timedelta(days=2))
    assert both.state(NOW) == "revoked"


def test_the_token_format_and_rows_load_without_sqlalchemy() -> None:
    """The command line reads SCOPES when it starts: that must not cost the engine."""
    script = (
        "import sys\n"
        "from verifier.store.tokens import SCOPES, TokenRow, new_token, well_formed\n"
        "from verifier.store import SessionFilter\n"
        "assert well_formed(new_token()) and 'admin' in SCOPES\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'alembic')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


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
        assert authenticate(store, new_token()) is None
        assert authenticate(store, "not a token") is None


def test_a_revoked_token_still_authenticates_so_the_caller_can_say_why(db_url: str) -> None:
    with Store.open(db_url) as store:
        row, secret = create_token(store, name="ci", scope="read", actor="test")
        revoked, _ = revoke_token(store, row.id, actor="test")
        found = authenticate(store, secret)
    assert found == revoked and found is not None
    assert found.state(datetime.now(UTC)) == "revoked"


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
