"""The work behind each route, run in the thread pool: one call into the command layer each.

Routes parse and answer; these take the shared `ServiceState` and call
`verifier.app` (the pipeline) or the store.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Request

from verifier.app import pipeline
from verifier.app.pipeline import BoundedBody, Oversized
from verifier.errors import InfrastructureError
from verifier.moments import utc_text
from verifier.service.api.deps import ServiceState
from verifier.store import SessionRow
from verifier.store.engine import HEAD_REVISION
from verifier.store.probes import schema_revision

log = logging.getLogger("verifier.api")


async def read_body(request: Request, limit: int) -> bytes | Oversized:
    """The body when it is at most `limit` bytes; otherwise what `pipeline.Oversized` keeps
    (a chunked body, or one longer than it said: the rest hashed and counted, never held)."""
    body = BoundedBody(limit)
    async for chunk in request.stream():
        body.add(chunk)
    return body.result()


def submit(
    service: ServiceState, raw: bytes | Oversized, source: str, agent: str | None
) -> tuple[SessionRow, bool]:
    """The one call into the pipeline for a posted report (`agent`: the token's bound agent)."""
    # The pipeline queues a new session's verification, in the transaction that
    # stores it when the queue lives in the same database (PostgreSQL).
    return pipeline.submit(
        service.store,
        raw,
        source,
        max_report_bytes=service.config.max_report_bytes,
        queue=service.queue,
        config=service.config,
        bound_agent=agent,
    )


def witness(
    service: ServiceState, session_id: str, body: bytes, agent: str | None
) -> dict[str, Any]:
    """Witness posted entries and sign the receipt with the service's key (the evidence
    key, ``[evidence] signing_key``)."""
    from audit.dsse import fingerprint
    from audit.witness import Receipt, sign_receipt
    from verifier.app.evidence import load_key, public_raw
    from verifier.store import witness as witnessed

    entries = witnessed.parse_lines(body)
    # Without its key the service cannot sign a receipt: 503 before anything is kept.
    key = load_key(service.config.evidence.signing_key)
    count, head, at = witnessed.witness(service.store, session_id, entries, agent=agent)
    time = utc_text(at, timespec="microseconds")
    return sign_receipt(Receipt(session_id, count, head, time), key, fingerprint(public_raw(key)))


def reverify(service: ServiceState, session_id: str, actor: str) -> None:
    assert service.queue is not None
    pipeline.reverify(service.store, session_id, service.queue, actor=actor)


def readiness(service: ServiceState) -> dict[str, str]:
    checks: dict[str, str] = {}
    try:
        revision = schema_revision(service.store)
        checks["database"] = "ok"
        checks["migrations"] = (
            "ok"
            if revision == HEAD_REVISION
            else f"at {revision or 'no revision'}, this verifier needs {HEAD_REVISION}"
        )
    except InfrastructureError:
        checks["database"] = "cannot be reached"
        checks["migrations"] = "unknown (no database)"
    if service.queue is not None:
        try:
            checks["queue"] = service.queue.reachable() or "ok"
        except Exception as exc:  # a probe reports, it never raises
            log.warning("readyz: queue: %s", exc)
            checks["queue"] = "cannot be reached"
    return checks
