"""API tokens: their format, how they are hashed, and which scope may do what.

Policy only; the tokens themselves are kept by `verifier.store.tokens`.

A token is ``vrf_`` followed by 32 random bytes in URL-safe base64. The
prefix lets secret scanners recognise a leaked token; the 256 random bits
make guessing hopeless, so a plain SHA-256 (no salt, no slow hash) is enough
to keep the database from holding anything that grants access.

Scopes: ``ingest`` posts reports, ``read`` reads sessions, statistics and
``/metrics``, ``export`` is reserved for the evidence export, and ``admin``
may do everything.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Final

from verifier.errors import BadRequest

if TYPE_CHECKING:
    from verifier.store.tokens import TokenRow

PREFIX: Final = "vrf_"
SCOPES: Final = ("ingest", "read", "export", "admin")
ADMIN: Final = "admin"
# secrets.token_urlsafe(32): 43 characters of the URL-safe base64 alphabet, no padding.
_FORMAT = re.compile(r"vrf_[A-Za-z0-9_-]{43}")


def new_token() -> str:
    """A fresh token: shown once to whoever creates it, never stored."""
    return PREFIX + secrets.token_urlsafe(32)


def token_sha256(token: str) -> str:
    """What the store keeps of a token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def well_formed(token: str) -> bool:
    """True when `token` has the shape of one of ours: anything else is refused unlooked-up."""
    return _FORMAT.fullmatch(token) is not None


def same_hash(stored: str, presented: str) -> bool:
    """Compare two token hashes in constant time.

    The store finds a token by its hash; comparing again here costs nothing and
    keeps the final decision free of timing differences, whatever the database does.
    """
    return hmac.compare_digest(stored.encode("ascii"), presented.encode("ascii"))


def allows(granted: str, needed: str) -> bool:
    """May a token of scope `granted` do what needs scope `needed`? Admin may do everything."""
    return granted in (ADMIN, needed)


def check_scope(scope: str) -> str:
    """`scope` when it is one of `SCOPES`; `BadRequest` naming the choices otherwise."""
    if scope not in SCOPES:
        raise BadRequest("scope", f"unknown scope {scope!r}: expected one of {', '.join(SCOPES)}")
    return scope


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: 401 (no usable token) or 403 (a token of another scope)."""

    status: int
    problem: str


def refusal(token: TokenRow | None, needed: str, now: datetime) -> Refusal | None:
    """None when `token` may act with scope `needed` at `now`; otherwise why not."""
    if token is None:
        return Refusal(401, "unknown token")
    if token.revoked_at is not None:
        return Refusal(401, f"token {token.name!r} was revoked")
    if token.expires_at is not None and token.expires_at <= now:
        return Refusal(401, f"token {token.name!r} expired at {token.expires_at.isoformat()}")
    if not allows(token.scope, needed):
        return Refusal(
            403, f"token {token.name!r} has scope {token.scope!r}; this needs scope {needed!r}"
        )
    return None
