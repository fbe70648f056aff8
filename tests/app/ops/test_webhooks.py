"""Webhooks against a real receiver on the loopback: signed bodies as stored, the event
filter, retries with backoff from the periodic work, the delivery log, and a webhook
problem that never touches the verdict."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import verification
from tests.support.receiver import receiver
from tests.support.report_factory import make_report_bytes
from verifier import cli
from verifier.app import notify, pipeline
from verifier.config import Config
from verifier.contract.report import parse_report
from verifier.errors import ConfigError
from verifier.findings import Verification
from verifier.store import Store
from verifier.store.webhooks import deliveries

SECRET = "whsec-loopback-7f3a"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with Store.open(db_url) as opened:
        opened.ingest(parse_report(make_report_bytes("s1", "done")))
        yield opened


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_SECRET", SECRET)


def config(url: str, hooks: dict[str, dict[str, Any]], **service: Any) -> Config:
    return Config.from_mapping(
        {
            "verifier": {"database_url": url},
            "service": {"public_url": "https://verifier.example", **service},
            "webhooks": {
                name: {"secret_env": "HOOK_SECRET", "timeout": 5.0, **hook}
                for name, hook in hooks.items()
            },
        }
    )


def silent_failure(session_id: str = "s1") -> Verification:
    return verification(session_id, failed=True)


def test_a_silent_failure_is_posted_signed_with_the_body_as_stored(
    store: Store, db_url: str
) -> None:
    with receiver() as hook:
        cfg = config(db_url, {"ops": {"url": hook.url}})
        run_id = pipeline.record(store, silent_failure(), cfg)

    [row] = deliveries(store)
    [got] = hook.requests
    assert got.path == "/hooks/verifier"
    assert got.body == row.body
    expected = hmac.new(SECRET.encode(), got.body, hashlib.sha256).hexdigest()
    assert got.headers["X-Verifier-Signature"] == f"sha256={expected}"
    assert got.headers["X-Verifier-Event"] == "silent_failure"
    assert got.headers["X-Verifier-Delivery"] == str(row.id)
    assert json.loads(got.body) == {
        "event": "silent_failure",
        "session_id": "s1",
        "agent": "repo-fixer",
        "repo": "calc",
        "head_commit": None,
        "delivery_status": "not_delivered",
        "done": True,
        "first_finding": {
            "code": "change.missing",
            "message": "calc.py is not at head",
            "path": "calc.py",
        },
        "run_id": run_id,
        "url": "https://verifier.example/v1/sessions/s1",
    }
    # Canonical JSON (RFC 8785): sorted keys, no spaces, so a receiver may re-hash it.
    assert (
        got.body == json.dumps(json.loads(got.body), sort_keys=True, separators=(",", ":")).encode()
    )
    assert (row.state, row.attempts, row.last_status, row.run_id) == ("delivered", 1, 200, run_id)


def test_a_signature_with_another_secret_does_not_verify(store: Store, db_url: str) -> None:
    with receiver() as hook:
        pipeline.record(store, silent_failure(), config(db_url, {"ops": {"url": hook.url}}))
    [got] = hook.requests
    forged = hmac.new(b"another secret", got.body, hashlib.sha256).hexdigest()
    assert got.headers["X-Verifier-Signature"] != f"sha256={forged}"


def test_the_event_filter_is_honoured(store: Store, db_url: str) -> None:
    store.ingest(parse_report(make_report_bytes("s2", "done")))
    store.ingest(parse_report(make_report_bytes("s3", "error")))
    with receiver() as failures, receiver() as verdicts:
        cfg = config(
            db_url,
            {
                "failures": {"url": failures.url, "events": ["silent_failure"]},
                "all": {"url": verdicts.url, "events": ["silent_failure", "verdict"]},
            },
        )
        pipeline.record(store, verification("s1"), cfg)  # delivered
        pipeline.record(store, silent_failure("s2"), cfg)
        not_done = dataclasses.replace(
            verification("s3", failed=True), done=False, agent_status="error"
        )
        pipeline.record(store, not_done, cfg)  # not delivered, but never claimed done
        pipeline.record(store, verification("s1", error=True), cfg)  # inconclusive

    def seen(hook: Any) -> list[tuple[str, str]]:
        return [
            (json.loads(r.body)["session_id"], r.headers["X-Verifier-Event"]) for r in hook.requests
        ]

    assert seen(failures) == [("s2", "silent_failure")]
    assert seen(verdicts) == [
        ("s1", "verdict"),
        ("s2", "silent_failure"),
        ("s3", "verdict"),
        ("s1", "verdict"),
    ]
    assert [json.loads(r.body)["delivery_status"] for r in verdicts.requests] == [
        "delivered",
        "not_delivered",
        "not_delivered",
        "inconclusive",
    ]


def test_a_500_is_retried_after_the_backoff_then_delivered(store: Store, db_url: str) -> None:
    with receiver([500, 200]) as hook:
        cfg = config(db_url, {"ops": {"url": hook.url}}, webhook_retry_base_s=60.0)
        notify.notify_run(store, cfg, silent_failure(), run_id=store_run(store), now=NOW)
        [row] = deliveries(store)
        assert (row.state, row.attempts, row.last_status) == ("pending", 1, 500)
        assert row.next_attempt_at == NOW + timedelta(seconds=60)

        early = notify.retry_due(store, cfg, now=NOW + timedelta(seconds=59))
        assert early == {"webhooks_delivered": 0, "webhooks_pending": 0, "webhooks_failed": 0}
        assert len(hook.requests) == 1

        later = notify.retry_due(store, cfg, now=NOW + timedelta(seconds=60))

    assert later["webhooks_delivered"] == 1
    [row] = deliveries(store)
    assert (row.state, row.attempts, row.last_status, row.last_error) == (
        "delivered",
        2,
        200,
        None,
    )
    assert [r.body for r in hook.requests] == [row.body, row.body]
    assert [r.headers["X-Verifier-Delivery"] for r in hook.requests] == [str(row.id)] * 2


def store_run(store: Store) -> int:
    return store.record_run(silent_failure())


def test_a_delivery_fails_after_the_last_attempt_with_doubling_waits(
    store: Store, db_url: str
) -> None:
    with receiver([500]) as hook:
        cfg = config(
            db_url, {"ops": {"url": hook.url}}, webhook_retry_base_s=10.0, webhook_max_attempts=4
        )
        notify.notify_run(store, cfg, silent_failure(), run_id=store_run(store), now=NOW)
        waits = []
        moment = NOW
        for _ in range(5):
            [row] = deliveries(store)
            if row.next_attempt_at is None:
                break
            waits.append((row.next_attempt_at - moment).total_seconds())
            moment = row.next_attempt_at
            notify.retry_due(store, cfg, now=moment)
        notify.retry_due(store, cfg, now=moment + timedelta(days=1))

    [row] = deliveries(store)
    assert waits == [10.0, 20.0, 40.0]
    assert (row.state, row.attempts, row.last_status, row.next_attempt_at) == (
        "failed",
        4,
        500,
        None,
    )
    assert len(hook.requests) == 4


def test_an_unreachable_webhook_never_touches_the_verdict(store: Store, db_url: str) -> None:
    with receiver() as hook:
        closed = hook.url  # the receiver stops: its port refuses connections
    cfg = config(db_url, {"ops": {"url": closed}})

    run_id = pipeline.record(store, silent_failure(), cfg)

    assert [r.id for r in store.runs("s1")] == [run_id]
    assert store.listed("s1").delivery_status == "not_delivered"
    [row] = deliveries(store)
    assert row.state == "pending" and row.attempts == 1
    assert row.last_status is None and "Connection" in (row.last_error or "")


def test_a_missing_secret_is_an_error_of_the_delivery_not_of_the_run(
    store: Store, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HOOK_SECRET")
    with receiver() as hook:
        run_id = pipeline.record(
            store, silent_failure(), config(db_url, {"ops": {"url": hook.url}})
        )
    assert hook.requests == []
    assert run_id == store.runs("s1")[0].id
    [row] = deliveries(store)
    assert row.last_error == "environment variable HOOK_SECRET is not set"


def test_a_claimed_delivery_is_not_sent_twice(store: Store, db_url: str) -> None:
    from verifier.store.webhooks import claim

    with receiver([500, 200]) as hook:
        cfg = config(db_url, {"ops": {"url": hook.url}}, webhook_retry_base_s=1.0)
        notify.notify_run(store, cfg, silent_failure(), run_id=store_run(store), now=NOW)
        [row] = deliveries(store)
        due_at = NOW + timedelta(seconds=1)
        assert claim(store, row.id, due_at, 60.0) is not None  # another process holds it
        assert notify.retry_due(store, cfg, now=due_at)["webhooks_delivered"] == 0
    assert len(hook.requests) == 1


def test_the_delivery_log_and_retry_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    monkeypatch.setenv("VERIFIER_DATABASE_URL", url)
    with receiver([503, 200]) as hook:
        path = tmp_path / "verifier.toml"
        path.write_text(
            f"[service]\nwebhook_retry_base_s = 0.001\n\n"
            f'[webhooks.ops]\nurl = "{hook.url}"\nsecret_env = "HOOK_SECRET"\n'
            'events = ["verdict"]\n',
            encoding="utf-8",
        )
        cfg = Config.load(path)
        with Store.open(url) as store:
            store.ingest(parse_report(make_report_bytes("s1", "done")))
            pipeline.record(store, silent_failure(), cfg)
        capsys.readouterr()

        assert cli.run(["webhooks", "log", "--config", str(path), "--state", "pending"]) == 0
        text = capsys.readouterr().out
        assert "pending" in text and "HTTP 503" in text and "silent_failure" in text

        assert cli.run(["webhooks", "retry", "--config", str(path), "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out)["webhooks_delivered"] == 1

        assert cli.run(["webhooks", "log", "--config", str(path), "--format", "json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)["deliveries"]
    assert {k: entry[k] for k in ("webhook", "event", "session_id", "state", "attempts")} == {
        "webhook": "ops",
        "event": "silent_failure",
        "session_id": "s1",
        "state": "delivered",
        "attempts": 2,
    }
    assert entry["last_status"] == 200 and entry["body"].encode() == hook.requests[-1].body
    assert cli.run(["webhooks", "log", "--config", str(path), "--state", "failed"]) == 0
    assert "(no deliveries)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("hook", "field", "problem"),
    [
        ({"url": "ftp://x.org", "secret_env": "S"}, "webhooks.h.url", "http:// or https://"),
        ({"url": "https://x.org", "secret_env": "NOT A NAME"}, "webhooks.h.secret_env", "name"),
        (
            {"url": "https://x.org", "secret_env": "S", "events": ["every"]},
            "webhooks.h.events",
            "'silent_failure', 'verdict'",
        ),
        (
            {"url": "https://x.org", "secret_env": "S", "events": []},
            "webhooks.h.events",
            "non-empty",
        ),
        ({"url": "https://x.org"}, "webhooks.h.secret_env", "required"),
        ({"url": "https://x.org", "secret_env": "S", "secret": "x"}, "webhooks.h", "never written"),
        (
            {"url": "https://x.org", "secret_env": "S", "retries": 3},
            "webhooks.h.retries",
            "unknown",
        ),
    ],
)
def test_a_bad_webhook_configuration_names_the_field(
    hook: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        Config.from_mapping({"webhooks": {"h": hook}})
    assert f"{field}:" in str(raised.value) and problem in str(raised.value)
