"""Many clients at once, over real HTTP (uvicorn on a free port, httpx clients in threads),
with the queue `verifier serve` uses on each engine: every session stored once, queued once."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.support.api import RealQueue, bearer, make_config, make_tokens, serve
from tests.support.report_factory import make_report_bytes
from verifier.service.api import create_app
from verifier.store import Store

CLIENTS = 8
REPORTS_EACH = 200


def test_eight_clients_posting_the_same_report_make_one_session_and_one_job(
    db_url: str,
) -> None:
    token = make_tokens(db_url)["ingest"]
    raw = make_report_bytes("s-same")
    queue = RealQueue(db_url)
    with serve(create_app(make_config(db_url), queue.queue)) as base:

        def send(_: int) -> int:
            with httpx.Client(base_url=base, timeout=60) as client:
                return client.post("/v1/sessions", content=raw, headers=bearer(token)).status_code

        with ThreadPoolExecutor(CLIENTS) as pool:
            statuses = sorted(pool.map(send, range(CLIENTS)))
    assert statuses == [200] * (CLIENTS - 1) + [202]
    assert queue.jobs() == ["s-same"]
    queue.close()
    with Store.open(db_url) as store:
        assert store.stats().totals.total == 1
        assert store.report_bytes("s-same") == raw


def test_eight_clients_posting_200_reports_each_lose_none(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    token = make_tokens(db_url)["ingest"]
    queue = RealQueue(db_url)
    with serve(create_app(make_config(db_url), queue.queue)) as base:

        def send(client_no: int) -> list[int]:
            statuses = []
            with httpx.Client(base_url=base, timeout=60, headers=bearer(token)) as client:
                for n in range(REPORTS_EACH):
                    raw = make_report_bytes(f"s-{client_no}-{n}")
                    statuses.append(client.post("/v1/sessions", content=raw).status_code)
            return statuses

        started = time.perf_counter()
        with ThreadPoolExecutor(CLIENTS) as pool:
            statuses = [s for batch in pool.map(send, range(CLIENTS)) for s in batch]
        elapsed = time.perf_counter() - started
    assert statuses == [202] * (CLIENTS * REPORTS_EACH)
    expected = {f"s-{c}-{n}" for c in range(CLIENTS) for n in range(REPORTS_EACH)}
    assert queue.jobs() == sorted(expected)  # each session queued once, none lost
    queue.close()
    with Store.open(db_url) as store:
        assert store.stats().totals.total == CLIENTS * REPORTS_EACH
        ids = {s.session.session_id for s in store.sessions()}
    assert ids == expected
    with capsys.disabled():  # a figure for the notes, never asserted on
        engine = db_url.split(":", 1)[0]
        print(
            f"\n{engine}: {len(statuses)} reports in {elapsed:.2f}s, "
            f"{len(statuses) / elapsed:.0f} reports/s through the API"
        )
