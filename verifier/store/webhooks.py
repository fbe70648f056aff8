"""The webhook delivery log: one row per notification to one webhook (migration 0006).

A row is written, with the exact body to send, when a run is recorded
(`verifier.app.notify`); it is then *claimed* before each attempt, by moving its
``next_attempt_at`` forward in one conditional UPDATE, so that two processes
running the periodic work never send the same delivery at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import select, update

from verifier.errors import BadRequest
from verifier.moments import utc_text
from verifier.store.models import WebhookDeliveryModel

if TYPE_CHECKING:
    from verifier.store.db import Store

DELIVERY_STATES = ("pending", "delivered", "failed")


@dataclass(frozen=True)
class NewDelivery:
    """A notification to write: the webhook's name and URL, the event, its exact body."""

    webhook: str
    url: str
    event: str
    session_id: str
    run_id: int | None
    body: bytes


@dataclass(frozen=True)
class DeliveryRow:
    """A stored delivery: what is sent, and how its attempts went so far."""

    id: int
    created_at: datetime
    webhook: str
    url: str
    event: str
    session_id: str
    run_id: int | None
    body: bytes
    state: str  # pending, delivered, failed
    attempts: int
    next_attempt_at: datetime | None
    last_attempt_at: datetime | None
    last_status: int | None
    last_error: str | None

    def to_dict(self) -> dict[str, Any]:
        """The delivery without its body, as ``verifier webhooks log`` lists it."""
        return {
            "id": self.id,
            "created_at": utc_text(self.created_at),
            "webhook": self.webhook,
            "url": self.url,
            "event": self.event,
            "session_id": self.session_id,
            "run_id": self.run_id,
            "state": self.state,
            "attempts": self.attempts,
            "next_attempt_at": utc_text(self.next_attempt_at),
            "last_attempt_at": utc_text(self.last_attempt_at),
            "last_status": self.last_status,
            "last_error": self.last_error,
        }


def add_deliveries(store: Store, deliveries: Sequence[NewDelivery], now: datetime) -> list[int]:
    """Write pending deliveries, due at `now`; returns their ids."""
    with store.transaction(write=True) as session:
        models = [
            WebhookDeliveryModel(
                created_at=now,
                webhook=d.webhook,
                url=d.url,
                event=d.event,
                session_id=d.session_id,
                run_id=d.run_id,
                body=d.body,
                state="pending",
                attempts=0,
                next_attempt_at=now,
            )
            for d in deliveries
        ]
        session.add_all(models)
        session.flush()
        return [m.id for m in models]


def due(store: Store, now: datetime, *, limit: int = 100) -> list[int]:
    """Ids of pending deliveries whose next attempt is due, oldest first."""
    with store.transaction() as session:
        return list(
            session.scalars(
                select(WebhookDeliveryModel.id)
                .where(
                    WebhookDeliveryModel.state == "pending",
                    WebhookDeliveryModel.next_attempt_at <= now,
                )
                .order_by(WebhookDeliveryModel.next_attempt_at, WebhookDeliveryModel.id)
                .limit(limit)
            )
        )


def claim(store: Store, delivery_id: int, now: datetime, lease_s: float) -> DeliveryRow | None:
    """The delivery, now this caller's to attempt for `lease_s` seconds; None when it is not
    due (another process claimed it, or it was delivered or failed meanwhile)."""
    with store.transaction(write=True) as session:
        claimed = session.execute(
            update(WebhookDeliveryModel)
            .where(
                WebhookDeliveryModel.id == delivery_id,
                WebhookDeliveryModel.state == "pending",
                WebhookDeliveryModel.next_attempt_at <= now,
            )
            .values(next_attempt_at=now + timedelta(seconds=lease_s))
        )
        if claimed.rowcount != 1:  # type: ignore[attr-defined]
            return None
        model = session.get(WebhookDeliveryModel, delivery_id)
        assert model is not None
        return _row(model)


def record_attempt(
    store: Store,
    delivery_id: int,
    *,
    at: datetime,
    status: int | None,
    error: str | None,
    next_attempt_at: datetime | None,
    delivered: bool,
) -> DeliveryRow:
    """One attempt's outcome: delivered, pending again at `next_attempt_at`, or failed
    (not delivered and no next attempt)."""
    with store.transaction(write=True) as session:
        model = session.get(WebhookDeliveryModel, delivery_id, with_for_update=True)
        assert model is not None
        model.attempts += 1
        model.last_attempt_at = at
        model.last_status = status
        model.last_error = error
        if delivered:
            model.state, model.next_attempt_at = "delivered", None
        elif next_attempt_at is None:
            model.state, model.next_attempt_at = "failed", None
        else:
            model.state, model.next_attempt_at = "pending", next_attempt_at
        session.flush()
        return _row(model)


def deliveries(
    store: Store,
    *,
    state: str | None = None,
    session_id: str | None = None,
    limit: int = 100,
) -> list[DeliveryRow]:
    """The delivery log, newest first."""
    if state is not None and state not in DELIVERY_STATES:
        raise BadRequest("state", f"must be one of {', '.join(DELIVERY_STATES)}, got {state!r}")
    query = select(WebhookDeliveryModel).order_by(WebhookDeliveryModel.id.desc()).limit(limit)
    if state is not None:
        query = query.where(WebhookDeliveryModel.state == state)
    if session_id is not None:
        query = query.where(WebhookDeliveryModel.session_id == session_id)
    with store.transaction() as session:
        return [_row(m) for m in session.scalars(query).all()]


def _row(model: WebhookDeliveryModel) -> DeliveryRow:
    return DeliveryRow(
        id=model.id,
        created_at=model.created_at,
        webhook=model.webhook,
        url=model.url,
        event=model.event,
        session_id=model.session_id,
        run_id=model.run_id,
        body=bytes(model.body),
        state=model.state,
        attempts=model.attempts,
        next_attempt_at=model.next_attempt_at,
        last_attempt_at=model.last_attempt_at,
        last_status=model.last_status,
        last_error=model.last_error,
    )
