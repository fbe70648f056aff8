"""`verifier.app.tokens`: create, list and revoke as functions of the configuration."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.support.api import make_config
from verifier.app import tokens
from verifier.errors import BadRequest, NotFound
from verifier.store import Store
from verifier.store.tokens import admin_log, authenticate


def test_a_token_is_created_once_listed_without_its_secret_and_revoked(db_url: str) -> None:
    config = make_config(db_url)
    created = tokens.create(config, name="ci", scope="read", actor="cli:al")
    assert created.view.state == "active" and created.secret
    with Store.open(db_url) as store:
        held = authenticate(store, created.secret)
    assert held is not None and held.id == created.view.token.id
    listed = tokens.tokens(config)
    assert [v.to_dict()["name"] for v in listed] == ["ci"]
    assert created.secret not in str([v.to_dict() for v in listed])
    revoked = tokens.revoke(config, created.view.token.id, actor="cli:al")
    assert revoked.now and revoked.view.state == "revoked"
    again = tokens.revoke(config, created.view.token.id, actor="cli:al")
    assert not again.now and again.view.to_dict()["revoked_at"] is not None
    with Store.open(db_url) as store:
        assert [e.action for e in admin_log(store)] == ["token.revoke", "token.create"]


def test_a_state_is_read_at_the_moment_of_the_view(db_url: str) -> None:
    config = make_config(db_url)
    soon = datetime.now(UTC) + timedelta(days=1)
    created = tokens.create(
        config, name="ci", scope="ingest", actor="t", expires_at=soon, agent="a"
    )
    data = created.view.to_dict()
    assert data["agent"] == "a" and data["expires_at"].endswith("Z")
    later = type(created.view)(created.view.token, soon + timedelta(seconds=1))
    assert later.state == "expired"


def test_a_token_bound_to_an_agent_must_be_an_ingest_token_and_an_id_must_exist(
    db_url: str,
) -> None:
    config = make_config(db_url)
    with pytest.raises(BadRequest):
        tokens.create(config, name="r", scope="read", actor="t", agent="a")
    with pytest.raises(NotFound):
        tokens.revoke(config, 99, actor="t")
