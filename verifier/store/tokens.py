"""API tokens and the admin log, kept in a `Store`.

A token is ``vrf_`` followed by 32 random bytes in URL-safe base64. The
prefix lets secret scanners recognise a leaked token; the 256 random bits
make guessing hopeless, so a plain SHA-256 (no salt, no slow hash) is enough
to keep the database from holding anything that grants access: only that
hash is stored, and a dump or a backup of the database grants no access.

Each token carries one of `SCOPES` and is, at any moment, active, expired or
revoked (`TokenRow.state`, the one place that rule is written). Which scope may
do what is the service's policy (`verifier.service.auth`), not the store's.

Creating and revoking a token appends its admin log entry in the same
transaction, so the log never misses an act that took effect, and never records
one that did not. The log itself is append-only: triggers refuse UPDATE and
DELETE (migration 0004).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Literal

from verifier.errors import BadRequest, NotFound

# SQLAlchemy and the models load in the functions that query: the command line reads
# SCOPES when it starts, and the token format and rule need no database.
if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from verifier.store.db import Store
    from verifier.store.models import AdminLogModel, TokenModel

PREFIX: Final = "vrf_"
# What a token may be granted; what each may do is `verifier.service.auth.allows`.
SCOPES: Final = ("ingest", "read", "export", "admin")
# secrets.token_urlsafe(32): 43 characters of the URL-safe base64 alphabet, no padding.
_FORMAT = re.compile(r"vrf_[A-Za-z0-9_-]{43}")

TokenState = Literal["active", "expired", "revoked"]


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


def check_scope(scope: str) -> str:
    """`scope` when it is one of `SCOPES`; `BadRequest` naming the choices otherwise."""
    if scope not in SCOPES:
        raise BadRequest("scope", f"unknown scope {scope!r}: expected one of {', '.join(SCOPES)}")
    return scope


@dataclass(frozen=True)
class TokenRow:
    """A stored token, without its secret (which is never stored)."""

    id: int
    name: str
    scope: str
    created_at: datetime
    created_by: str
    expires_at: datetime | None
    revoked_at: datetime | None
    # The agent an ingest token is bound to: it posts only that agent's reports and trails.
    agent: str | None = None

    def state(self, now: datetime) -> TokenState:
        """active, expired or revoked at `now`: a revoked token stays revoked whatever
        its expiry, and a token expires at the moment of its `expires_at`."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"


@dataclass(frozen=True)
class AdminEntry:
    """One administrative act: who (``token:<name>``, ``cli:<user>``), what, on what, when."""

    id: int
    at: datetime
    actor: str
    action: str
    subject: str | None
    detail: dict[str, Any]


def create_token(
    store: Store,
    *,
    name: str,
    scope: str,
    actor: str,
    expires_at: datetime | None = None,
    agent: str | None = None,
) -> tuple[TokenRow, str]:
    """A new token and its secret, the only time the secret exists; logged as ``token.create``.

    An ingest token may be bound to an `agent`: it posts only that agent's reports.
    """
    from verifier.store.models import TokenModel

    check_scope(scope)
    if not name.strip():
        raise BadRequest("name", "a token needs a name that is not blank")
    if agent is not None and (scope != "ingest" or not agent.strip()):
        problem = (
            "an agent name that is not blank"
            if scope == "ingest"
            else f"only ingest tokens are bound to an agent, got scope {scope!r}"
        )
        raise BadRequest("agent", problem)
    secret = new_token()
    model = TokenModel(
        name=name,
        scope=scope,
        token_sha256=token_sha256(secret),
        created_by=actor,
        expires_at=expires_at,
        agent=agent,
    )
    with store.transaction() as session:
        session.add(model)
        session.flush()
        detail: dict[str, Any] = {"name": name, "scope": scope}
        if expires_at is not None:
            detail["expires_at"] = expires_at.isoformat()
        if agent is not None:
            detail["agent"] = agent
        _append(session, actor, "token.create", str(model.id), detail)
        return _token_row(model), secret


def list_tokens(store: Store) -> list[TokenRow]:
    """Every token ever created, revoked and expired ones included, oldest first."""
    from sqlalchemy import select

    from verifier.store.models import TokenModel

    with store.transaction() as session:
        models = session.scalars(select(TokenModel).order_by(TokenModel.id)).all()
        return [_token_row(m) for m in models]


def revoke_token(store: Store, token_id: int, *, actor: str) -> tuple[TokenRow, bool]:
    """Revoke a token; True when this call revoked it (logged as ``token.revoke``).

    Revoking a revoked token changes nothing and logs nothing: the first revocation stands.
    """
    from verifier.store.models import TokenModel

    with store.transaction() as session:
        model = session.get(TokenModel, token_id, with_for_update=True)
        if model is None:
            raise NotFound(f"no token with id {token_id}")
        if model.revoked_at is not None:
            return _token_row(model), False
        model.revoked_at = datetime.now(UTC)
        session.flush()
        _append(session, actor, "token.revoke", str(token_id), {"name": model.name})
        return _token_row(model), True


def authenticate(store: Store, token: str) -> TokenRow | None:
    """The stored token `token` is the secret of, or None; revoked and expired tokens
    are returned too, so that the caller can say which applies (`TokenRow.state`).

    Read from the database at every call, so that a revocation made by any process
    counts from its commit on; one Core query on one connection (every API request
    makes it: the ORM cost eight times as much)."""
    if not well_formed(token):
        return None
    digest = token_sha256(token)
    with store.connection() as connection:
        found = connection.execute(_by_digest(), {"digest": digest}).first()
    if found is None or not same_hash(found.token_sha256, digest):
        return None
    return TokenRow(**{name: found._mapping[name] for name in _ROW_FIELDS})


_ROW_FIELDS = tuple(f.name for f in dataclasses.fields(TokenRow))


@functools.cache
def _by_digest() -> Any:
    """The token lookup, built once (SQLAlchemy loads only when a store is used)."""
    from sqlalchemy import bindparam, select

    from verifier.store.models import TokenModel

    table = TokenModel.__table__
    columns = [table.c[name] for name in (*_ROW_FIELDS, "token_sha256")]
    return select(*columns).where(table.c.token_sha256 == bindparam("digest"))


def log_admin(
    store: Store,
    *,
    actor: str,
    action: str,
    subject: str | None = None,
    detail: Mapping[str, Any] | None = None,
) -> AdminEntry:
    """Append one administrative act to the admin log."""
    with store.transaction() as session:
        return _append(session, actor, action, subject, dict(detail or {}))


def admin_log(store: Store, *, limit: int = 100, before_id: int | None = None) -> list[AdminEntry]:
    """The admin log, newest first; `before_id` pages back."""
    from sqlalchemy import select

    from verifier.store.models import AdminLogModel

    query = select(AdminLogModel).order_by(AdminLogModel.id.desc()).limit(limit)
    if before_id is not None:
        query = query.where(AdminLogModel.id < before_id)
    with store.transaction() as session:
        return [_entry(m) for m in session.scalars(query).all()]


def _append(
    session: Session, actor: str, action: str, subject: str | None, detail: dict[str, Any]
) -> AdminEntry:
    from verifier.store.models import AdminLogModel

    model = AdminLogModel(actor=actor, action=action, subject=subject, detail=detail)
    session.add(model)
    session.flush()
    return _entry(model)


def _token_row(model: TokenModel) -> TokenRow:
    return TokenRow(
        id=model.id,
        name=model.name,
        scope=model.scope,
        created_at=model.created_at,
        created_by=model.created_by,
        expires_at=model.expires_at,
        revoked_at=model.revoked_at,
        agent=model.agent,
    )


def _entry(model: AdminLogModel) -> AdminEntry:
    return AdminEntry(
        id=model.id,
        at=model.at,
        actor=model.actor,
        action=model.action,
        subject=model.subject,
        detail=dict(model.detail),
    )
