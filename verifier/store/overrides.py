"""Verdict overrides: a person's verdict beside the computed one, never over it.

`record_override` appends to `verdict_overrides` (append-only by triggers,
migration 0006), points the session at it, and logs the act in the admin log,
all in one transaction. The computed verdict, its runs and `session_counts` are
untouched: the stats count computed verdicts; a merge gate reads
`Listed.effective_status`, which prefers the override.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import ColumnElement, func, select

from verifier.errors import BadRequest, NotFound
from verifier.store.models import AdminLogModel, SessionModel, VerdictOverrideModel

if TYPE_CHECKING:
    from verifier.store.db import Store

# What a person may say; ``cleared`` withdraws the standing override.
OVERRIDE_STATUSES = ("delivered", "not_delivered", "cleared")


@dataclass(frozen=True)
class OverrideRow:
    """One override of a session's verdict: who set which status, when and why."""

    id: int
    session_id: str
    at: datetime
    author: str
    status: str
    reason: str

    def to_dict(self) -> dict[str, str | int]:
        """The override as the API and the evidence bundle give it."""
        return {
            "id": self.id,
            "session_id": self.session_id,
            "at": self.at.isoformat(),
            "author": self.author,
            "status": self.status,
            "reason": self.reason,
        }


def record_override(
    store: Store, session_id: str, *, status: str, reason: str, author: str
) -> OverrideRow:
    """Append an override of `session_id`'s verdict; logged as ``session.override``."""
    if status not in OVERRIDE_STATUSES:
        raise BadRequest("status", f"must be one of {', '.join(OVERRIDE_STATUSES)}, got {status!r}")
    if not reason.strip():
        raise BadRequest("reason", "an override needs a reason that is not blank")
    if not author.strip():
        raise BadRequest("author", "an override needs an author")
    with store.transaction(write=True) as session:
        stored = session.scalars(
            select(SessionModel).where(SessionModel.session_id == session_id).with_for_update()
        ).one_or_none()
        if stored is None:
            raise NotFound(f"session {session_id!r} is not stored")
        model = VerdictOverrideModel(
            session_id=session_id, author=author, status=status, reason=reason
        )
        session.add(model)
        session.flush()
        stored.override_status = None if status == "cleared" else status
        stored.override_id = model.id
        session.add(
            AdminLogModel(
                actor=author,
                action="session.override",
                subject=session_id,
                detail={
                    "override_id": model.id,
                    "status": status,
                    "reason": reason,
                    "computed": stored.delivery_status,
                },
            )
        )
        session.flush()
        return _row(model)


def overrides(store: Store, session_id: str) -> list[OverrideRow]:
    """Every override of `session_id`, oldest first (the last one stands)."""
    with store.transaction() as session:
        models = session.scalars(
            select(VerdictOverrideModel)
            .where(VerdictOverrideModel.session_id == session_id)
            .order_by(VerdictOverrideModel.id)
        ).all()
        return [_row(m) for m in models]


def overridden_count(
    store: Store,
    *,
    ended_from: datetime | None = None,
    ended_to: datetime | None = None,
    agent: str | None = None,
    model: str | None = None,
    repo: str | None = None,
) -> int:
    """How many sessions carry a standing override (the stats say they count none), of
    those `Store.stats` counts with the same arguments: ended from `ended_from`
    (included) to `ended_to` (excluded), of one agent, model ('' for none) or repository."""
    conditions: list[ColumnElement[bool]] = [SessionModel.override_status.is_not(None)]
    if agent is not None:
        conditions.append(SessionModel.agent_name == agent)
    if model is not None:
        conditions.append(func.coalesce(SessionModel.agent_model, "") == model)
    if repo is not None:
        conditions.append(SessionModel.repo_name == repo)
    if ended_from is not None:
        conditions.append(SessionModel.ended_at >= ended_from)
    if ended_to is not None:
        conditions.append(SessionModel.ended_at < ended_to)
    with store.transaction() as session:
        return int(session.scalar(select(func.count()).where(*conditions)) or 0)


def _row(model: VerdictOverrideModel) -> OverrideRow:
    return OverrideRow(
        id=model.id,
        session_id=model.session_id,
        at=model.at,
        author=model.author,
        status=model.status,
        reason=model.reason,
    )
