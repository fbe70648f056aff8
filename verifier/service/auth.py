"""Which scope may do what: the service's policy for API tokens.

Policy only. The tokens themselves are the store's (`verifier.store.tokens`):
their format, the hash kept of them, the scopes one may carry, and whether one
is active, expired or revoked (`TokenRow.state`). This module decides whether a
token may do what a request needs, and says why not.

Scopes: ``ingest`` posts reports, ``read`` reads sessions, statistics and
``/metrics``, ``export`` is reserved for the evidence export, and ``admin``
may do everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from verifier.store.tokens import TokenRow

ADMIN: Final = "admin"


def allows(granted: str, needed: str) -> bool:
    """May a token of scope `granted` do what needs scope `needed`? Admin may do everything."""
    return granted in (ADMIN, needed)


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: 401 (no usable token) or 403 (a token of another scope)."""

    status: int
    problem: str


def refusal(token: TokenRow | None, needed: str, now: datetime) -> Refusal | None:
    """None when `token` may act with scope `needed` at `now`; otherwise why not."""
    if token is None:
        return Refusal(401, "unknown token")
    state = token.state(now)
    if state == "revoked":
        return Refusal(401, f"token {token.name!r} was revoked")
    if state == "expired":
        assert token.expires_at is not None  # a token expires only at its expires_at
        return Refusal(401, f"token {token.name!r} expired at {token.expires_at.isoformat()}")
    if not allows(token.scope, needed):
        return Refusal(
            403, f"token {token.name!r} has scope {token.scope!r}; this needs scope {needed!r}"
        )
    return None
