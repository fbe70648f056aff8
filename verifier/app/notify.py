"""Webhook notifications: a done session found not delivered, and optionally every verdict.

Configured as ``[webhooks.NAME]`` (`verifier.config.WebhookConfig`). When a run
is recorded (`verifier.app.pipeline.record`, the one place runs are recorded),
`notify_run`:

1. picks the event: ``silent_failure`` for a conclusive not-delivered run of a
   done session, else ``verdict``; a webhook takes the run when it subscribes to
   that event (a ``verdict`` subscriber also takes silent failures);
2. writes one delivery per such webhook (`verifier.store.webhooks`), holding the
   exact body to send: the canonical JSON (RFC 8785) of the notification;
3. attempts each once at once (`attempt`).

An attempt POSTs the stored body with ``X-Verifier-Event``,
``X-Verifier-Delivery`` (the row id) and ``X-Verifier-Signature: sha256=<hex
HMAC-SHA256 of the body>``, the key read from the environment variable the
webhook names. A 2xx answer delivers it; anything else (another status, a
refused connection, a timeout, a missing secret) is tried again by the periodic
work (`retry_due`) after ``webhook_retry_base_s``, twice as long after each
failure, until ``webhook_max_attempts`` (then: failed). Nothing here ever fails
or delays a verdict beyond one attempt's timeout: the run is recorded first.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import logging
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from audit.jcs import canonicalize
from verifier.findings import DeliveryStatus, Verification

if TYPE_CHECKING:
    from verifier.config import Config, WebhookConfig
    from verifier.store import Store
    from verifier.store.webhooks import DeliveryRow

log = logging.getLogger("verifier.notify")

SIGNATURE_HEADER = "X-Verifier-Signature"
EVENT_HEADER = "X-Verifier-Event"
DELIVERY_HEADER = "X-Verifier-Delivery"
# An attempt holds its delivery this long beyond the webhook's timeout (see `claim`).
LEASE_MARGIN_S = 60.0
_ERROR_CHARS = 500


@dataclass(frozen=True)
class Attempt:
    """What one attempt got: an HTTP status, or the error that stopped it."""

    status: int | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def event_of(verification: Verification) -> str:
    """silent_failure for a done session found not delivered, else verdict."""
    if verification.done and verification.delivery_status is DeliveryStatus.NOT_DELIVERED:
        return "silent_failure"
    return "verdict"


def subscribed(webhook: WebhookConfig, event: str) -> bool:
    return event in webhook.events or "verdict" in webhook.events


def body(
    verification: Verification,
    *,
    event: str,
    run_id: int,
    agent: str,
    repo: str,
    head_commit: str | None,
    public_url: str,
) -> bytes:
    """The notification's bytes: canonical JSON, the same bytes stored, signed and sent."""
    first = verification.first_finding
    path = f"/v1/sessions/{urllib.parse.quote(verification.session_id, safe='')}"
    return canonicalize(
        {
            "event": event,
            "session_id": verification.session_id,
            "agent": agent,
            "repo": repo,
            "head_commit": head_commit,
            "delivery_status": verification.delivery_status.value,
            "done": verification.done,
            "first_finding": None if first is None else first.to_dict(),
            "run_id": run_id,
            "url": public_url.rstrip("/") + path,
        }
    )


def signature(secret: bytes, payload: bytes) -> str:
    """The signature header's value: ``sha256=`` and the hex HMAC-SHA256 of `payload`."""
    return "sha256=" + hmac.new(secret, payload, hashlib.sha256).hexdigest()


def notify_run(
    store: Store,
    config: Config,
    verification: Verification,
    run_id: int,
    *,
    now: datetime | None = None,
) -> list[int]:
    """Write the deliveries of one recorded run and attempt each once; their ids.

    Never raises: a notification problem is logged, the verdict stands.
    """
    if not config.webhooks:
        return []
    try:
        from verifier.store.webhooks import NewDelivery, add_deliveries

        event = event_of(verification)
        hooks = [w for w in config.webhooks.values() if subscribed(w, event)]
        if not hooks:
            return []
        session = store.get_session(verification.session_id)
        payload = body(
            verification,
            event=event,
            run_id=run_id,
            agent=session.agent_name,
            repo=session.repo_name,
            head_commit=session.head_commit,
            public_url=config.service.public_url,
        )
        moment = now or datetime.now(UTC)
        ids = add_deliveries(
            store,
            [
                NewDelivery(w.name, w.url, event, verification.session_id, run_id, payload)
                for w in hooks
            ],
            moment,
        )
        for delivery_id in ids:
            attempt_due(store, config, delivery_id, now=moment)
        return ids
    except Exception:  # a notification never fails a verdict
        log.exception("webhooks: the notification of run %s failed", run_id)
        return []


def retry_due(store: Store, config: Config, *, now: datetime | None = None) -> dict[str, int]:
    """Attempt every delivery that is due (the periodic work, `verifier webhooks retry`)."""
    from verifier.store.webhooks import due

    moment = now or datetime.now(UTC)
    counts = {"webhooks_delivered": 0, "webhooks_pending": 0, "webhooks_failed": 0}
    for delivery_id in due(store, moment):
        row = attempt_due(store, config, delivery_id, now=moment)
        if row is not None:
            counts[f"webhooks_{row.state}"] += 1
    return counts


def attempt_due(
    store: Store, config: Config, delivery_id: int, *, now: datetime | None = None
) -> DeliveryRow | None:
    """Claim one due delivery, send it, and record the outcome; None when not ours to send."""
    from verifier.store.webhooks import claim, record_attempt

    moment = now or datetime.now(UTC)
    row = claim(store, delivery_id, moment, LEASE_MARGIN_S)
    if row is None:
        return None
    webhook = config.webhooks.get(row.webhook)
    if webhook is None:
        result = Attempt(None, f"webhook {row.webhook!r} is no longer configured")
    else:
        result = send(webhook, row.body, event=row.event, delivery_id=row.id, environ=os.environ)
    attempts = row.attempts + 1
    retry = None
    if not result.ok and webhook is not None and attempts < config.service.webhook_max_attempts:
        delay = config.service.webhook_retry_base_s * 2 ** (attempts - 1)
        retry = moment + timedelta(seconds=delay)
    if not result.ok:
        log.warning(
            "webhook %s: delivery %s attempt %s: %s",
            row.webhook,
            row.id,
            attempts,
            result.error or f"HTTP {result.status}",
        )
    return record_attempt(
        store,
        row.id,
        at=moment,
        status=result.status,
        error=result.error,
        next_attempt_at=retry,
        delivered=result.ok,
    )


def send(
    webhook: WebhookConfig,
    payload: bytes,
    *,
    event: str,
    delivery_id: int,
    environ: Mapping[str, str],
) -> Attempt:
    """POST `payload` to the webhook, signed; redirects are not followed (a failure)."""
    secret = environ.get(webhook.secret_env)
    if not secret:
        return Attempt(None, f"environment variable {webhook.secret_env} is not set")
    url = urllib.parse.urlsplit(webhook.url)
    connection_type: Any = (
        http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
    )
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "verifier-webhooks",
        EVENT_HEADER: event,
        DELIVERY_HEADER: str(delivery_id),
        SIGNATURE_HEADER: signature(secret.encode(), payload),
    }
    target = (url.path or "/") + (f"?{url.query}" if url.query else "")
    try:
        connection = connection_type(url.hostname, url.port, timeout=webhook.timeout_s)
        try:
            connection.request("POST", target, body=payload, headers=headers)
            response = connection.getresponse()
            response.read(64 * 1024)
            status = response.status
        finally:
            connection.close()
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return Attempt(None, f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS])
    if 200 <= status < 300:
        return Attempt(status, None)
    return Attempt(status, f"HTTP {status}")
