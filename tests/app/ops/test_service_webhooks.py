"""Webhooks in the service: a real verification notifies once where the run is recorded,
the periodic work retries, and the webhook's secret never reaches the code under test."""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.receiver import receiver
from tests.support.service import sessions, wait_for, write_config
from verifier.app.pipeline import submit
from verifier.config import Config
from verifier.service.serve import Background
from verifier.store import Store
from verifier.store.queue import LocalQueue
from verifier.store.webhooks import deliveries

SECRET = "whsec-never-in-tests-91c2"
NEVER = "0 0 1 1 *"
# The code under test fails when it can see `variable` or any value holding `needle`.
CHECK_ENV = (
    "import os, sys; variable, needle = sys.argv[1], sys.argv[2]; "
    "seen = [k for k, v in os.environ.items() if k == variable or needle in v]; "
    "print('seen:', seen); sys.exit(1 if seen else 0)"
)


@contextmanager
def service(config: Config) -> Iterator[tuple[Background, Store]]:
    with Store.open(config.database_url) as store:
        started = Background.start(config, store, worker=True)
        try:
            yield started, store
        finally:
            started.stop()


def idle(bg: Background) -> None:
    queue = bg.queue
    assert isinstance(queue, LocalQueue)
    wait_for("the pool idle", lambda: not queue.queued())


def configured(tmp_path: Path, repo: GitRepo, hook_url: str, variable: str, needle: str) -> Config:
    path = write_config(
        tmp_path,
        repo,
        [sys.executable, "-c", CHECK_ENV, variable, needle],
        database_url=f"sqlite:///{tmp_path / 'svc.sqlite3'}",
        maintenance_cron=NEVER,
        webhook_retry_base_s=0.01,
    )
    with path.open("a", encoding="utf-8") as out:
        out.write(
            f'\n[webhooks.ops]\nurl = "{hook_url}"\nsecret_env = "HOOK_SECRET"\n'
            'events = ["silent_failure", "verdict"]\n'
        )
    return Config.load(path, environ={})


@pytest.mark.parametrize(
    ("variable", "needle", "verdict", "event"),
    [
        # The webhook's secret: neither its variable nor its value reaches the tests.
        ("HOOK_SECRET", SECRET, "delivered", "verdict"),
        # The control: what the tests are given is seen, so the check above can fail.
        ("LANG", "C.UTF-8", "not_delivered", "silent_failure"),
    ],
)
def test_a_verification_notifies_and_the_periodic_work_retries(
    repo: GitRepo,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    needle: str,
    verdict: str,
    event: str,
) -> None:
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    with receiver([500, 200]) as hook:
        config = configured(tmp_path, repo, hook.url, variable, needle)
        with service(config) as (bg, store):
            submit(store, sessions(repo, 1)[0], "test", queue=bg.queue)
            wait_for("verified", lambda: store.listed("s-0000").latest_run is not None)
            idle(bg)
            assert store.listed("s-0000").delivery_status == verdict
            [row] = deliveries(store)
            assert (row.state, row.attempts, row.last_status, row.event) == (
                "pending",
                1,
                500,
                event,
            )
            wait_for("retried", lambda: bg.maintain().get("webhooks_delivered") == 1)
            [row] = deliveries(store)
            runs = store.runs("s-0000")

    assert (row.state, row.attempts) == ("delivered", 2)
    assert [r.body for r in hook.requests] == [row.body, row.body]
    signed = hmac.new(SECRET.encode(), row.body, hashlib.sha256).hexdigest()
    assert hook.requests[-1].headers["X-Verifier-Signature"] == f"sha256={signed}"
    body = json.loads(row.body)
    assert (body["event"], body["delivery_status"], body["run_id"]) == (event, verdict, runs[0].id)
    assert len(runs) == 1  # one run, one notification: the hook is where runs are recorded


def test_the_command_lines_verification_notifies_through_the_same_record(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.sessions import fixed_session, to_bytes
    from verifier.app.pipeline import verify_report

    monkeypatch.setenv("HOOK_SECRET", SECRET)
    with receiver() as hook:
        config = configured(tmp_path, repo, hook.url, "HOOK_SECRET", SECRET)
        outcome = verify_report(to_bytes(fixed_session(repo).report()), config)
    assert outcome.stored == f"stored as run {outcome.run_id}"
    [got] = hook.requests
    body = json.loads(got.body)
    assert (body["event"], body["delivery_status"], body["run_id"]) == (
        "verdict",
        "delivered",
        outcome.run_id,
    )


def test_the_workers_periodic_round_retries_due_deliveries(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.api import verification
    from tests.support.report_factory import make_report_bytes
    from verifier.app.notify import notify_run
    from verifier.contract.report import parse_report
    from verifier.service.worker import Runtime, retry_webhooks

    monkeypatch.setenv("HOOK_SECRET", SECRET)
    with receiver([502, 204]) as hook:
        config = Config.from_mapping(
            {
                "verifier": {"database_url": db_url},
                "service": {"webhook_retry_base_s": 0.01},
                "webhooks": {"ops": {"url": hook.url, "secret_env": "HOOK_SECRET"}},
            }
        )
        with Store.open(db_url) as store:
            store.ingest(parse_report(make_report_bytes("s1", "done")))
            failed = verification("s1", failed=True)
            notify_run(store, config, failed, store.record_run(failed))
            assert deliveries(store)[0].state == "pending"
            runtime = Runtime(config, store)
            wait_for("retried", lambda: retry_webhooks(runtime).get("webhooks_delivered") == 1)
            [row] = deliveries(store)
    assert (row.state, row.attempts, row.last_status) == ("delivered", 2, 204)
    assert len(hook.requests) == 2
