"""The webhooks' delivery log and its retries: the commands of ``verifier webhooks log|retry``.

Notifying is `verifier.app.notify` (when a run is recorded); these read what it
wrote, and attempt now what is due, as the service's periodic work does.
"""

from __future__ import annotations

from verifier.app import Notice, notify
from verifier.config import Config
from verifier.store import NoStore, Store
from verifier.store import webhooks as store_webhooks
from verifier.store.webhooks import DeliveryRow


def deliveries(
    config: Config,
    *,
    state: str | None = None,
    session_id: str | None = None,
    limit: int = 100,
    notice: Notice | None = None,
) -> list[DeliveryRow]:
    """The delivery log, newest first: of one `state`, of one session; none when nothing
    is stored yet (`notice` says so)."""
    try:
        with Store.open(config.database_url, read_only=True) as store:
            return store_webhooks.deliveries(store, state=state, session_id=session_id, limit=limit)
    except NoStore as exc:
        if notice is not None:
            notice(str(exc))
        return []


def retry(config: Config) -> dict[str, int]:
    """Attempt every pending delivery whose next attempt is due; how many were delivered,
    are to be retried, and failed for good."""
    with Store.open(config.database_url) as store:
        return notify.retry_due(store, config)
