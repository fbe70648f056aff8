"""`verifier.app.webhooks`: the delivery log and the due deliveries attempted now, from
the configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.api import verification
from tests.support.receiver import receiver
from tests.support.report_factory import make_report_bytes
from verifier.app import pipeline, webhooks
from verifier.config import Config
from verifier.contract.report import parse_report
from verifier.errors import BadRequest
from verifier.store import Store


def test_no_store_is_an_empty_log_and_says_why(tmp_path: Path) -> None:
    config = Config.from_mapping({"verifier": {"database_url": f"sqlite:///{tmp_path / 'x.db'}"}})
    said: list[str] = []
    assert webhooks.deliveries(config, notice=said.append) == []
    assert len(said) == 1 and "no store at" in said[0]


def test_a_failed_attempt_is_logged_then_retried_until_delivered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_SECRET", "s3cret")
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    with receiver([503, 200]) as hook:
        config = Config.from_mapping(
            {
                "verifier": {"database_url": url},
                "service": {"webhook_retry_base_s": 0.001},
                "webhooks": {"ops": {"url": hook.url, "secret_env": "HOOK_SECRET"}},
            }
        )
        with Store.open(url) as store:
            store.ingest(parse_report(make_report_bytes("s1")))
            pipeline.record(store, verification("s1", failed=True), config)
        [pending] = webhooks.deliveries(config, state="pending")
        assert pending.last_status == 503 and pending.session_id == "s1"
        assert webhooks.deliveries(config, session_id="other") == []
        counts = webhooks.retry(config)
    assert counts == {"webhooks_delivered": 1, "webhooks_pending": 0, "webhooks_failed": 0}
    [delivered] = webhooks.deliveries(config)
    assert delivered.state == "delivered" and delivered.attempts == 2
    with pytest.raises(BadRequest, match="state"):
        webhooks.deliveries(config, state="lost")
