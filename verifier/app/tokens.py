"""API tokens: the commands of ``verifier token create|list|revoke``.

Each opens the store, acts through `verifier.store.tokens` (which writes the
admin log) and returns `TokenView` values; a secret exists only in what `create`
returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from verifier.config import Config
from verifier.moments import utc_text
from verifier.store import Store
from verifier.store.tokens import TokenRow, create_token, list_tokens, revoke_token


@dataclass(frozen=True)
class TokenView:
    """A token as an operator reads it: never its secret; its state as of `now`."""

    token: TokenRow
    now: datetime

    @property
    def state(self) -> str:
        """active, expired or revoked."""
        return self.token.state(self.now)

    def to_dict(self) -> dict[str, Any]:
        token = self.token
        return {
            "id": token.id,
            "name": token.name,
            "scope": token.scope,
            "state": self.state,
            "created_at": utc_text(token.created_at),
            "created_by": token.created_by,
            "expires_at": utc_text(token.expires_at),
            "revoked_at": utc_text(token.revoked_at),
            "agent": token.agent,
        }


@dataclass(frozen=True)
class Created:
    """A token just created, and its secret: shown this once, only its hash is stored."""

    view: TokenView
    secret: str


@dataclass(frozen=True)
class Revoked:
    """A token after `revoke`; `now` is False when it was revoked already."""

    view: TokenView
    now: bool


def create(
    config: Config,
    *,
    name: str,
    scope: str,
    actor: str,
    expires_at: datetime | None = None,
    agent: str | None = None,
) -> Created:
    """A new token of `scope`, held by `name`; an ingest token may be bound to an `agent`."""
    with Store.open(config.database_url) as store:
        token, secret = create_token(
            store, name=name, scope=scope, actor=actor, expires_at=expires_at, agent=agent
        )
    return Created(TokenView(token, datetime.now(UTC)), secret)


def tokens(config: Config) -> list[TokenView]:
    """Every token ever created, oldest first."""
    with Store.open(config.database_url) as store:
        rows = list_tokens(store)
    now = datetime.now(UTC)
    return [TokenView(token, now) for token in rows]


def revoke(config: Config, token_id: int, *, actor: str) -> Revoked:
    """Revoke a token (`NotFound` when there is none with that id)."""
    with Store.open(config.database_url) as store:
        token, changed = revoke_token(store, token_id, actor=actor)
    return Revoked(TokenView(token, datetime.now(UTC)), changed)
