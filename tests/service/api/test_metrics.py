"""/metrics: figures read from the database (right with several processes), check timings,
bounded labels."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.support.api import bearer, make_config, make_tokens, verification
from tests.support.report_factory import make_report_bytes
from verifier.service.api import create_app
from verifier.service.metrics import observe_run
from verifier.store import Store


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_from_the_database_whichever_process_ingested(db_url: str) -> None:
    tokens = make_tokens(db_url)
    config = make_config(db_url)
    # Two apps on one database stand for two processes: one ingests, the other is scraped.
    with TestClient(create_app(config)) as one, TestClient(create_app(config)) as other:
        for sid, status in (("s-1", "done"), ("s-2", "done"), ("s-3", "error")):
            assert (
                one.post(
                    "/v1/sessions",
                    content=make_report_bytes(sid, status),
                    headers=bearer(tokens["ingest"]),
                ).status_code
                == 202
            )
        with Store.open(db_url) as store:
            store.record_run(verification("s-1"))
            store.record_run(verification("s-2", error=True))
        before = samples(other.get("/metrics", headers=bearer(tokens["read"])).text)
        observe_run(verification("s-1"))
        response = other.get("/metrics", headers=bearer(tokens["read"]))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    after = samples(response.text)
    assert after[("verifier_sessions_ingested_total", (("agent_status", "done"),))] == 2
    assert after[("verifier_sessions_ingested_total", (("agent_status", "not_done"),))] == 1
    assert after[("verifier_verdicts_total", (("verdict", "delivered"),))] == 1
    assert after[("verifier_verdicts_total", (("verdict", "inconclusive"),))] == 1
    assert after[("verifier_verdicts_total", (("verdict", "not_delivered"),))] == 0
    assert after[("verifier_pending_sessions", ())] == 1
    assert after[("verifier_inconclusive_sessions", ())] == 1
    count = ("verifier_check_seconds_count", (("check", "tests"),))
    assert after[count] == before.get(count, 0) + 1
    assert "s-1" not in response.text and "s-3" not in response.text


def test_the_metrics_labels_are_bounded(sqlite_url: str) -> None:
    tokens = make_tokens(sqlite_url)
    with TestClient(create_app(make_config(sqlite_url))) as client:
        for n in range(20):
            client.post(
                "/v1/sessions",
                content=make_report_bytes(f"s-{n}", f"status-{n}"),
                headers=bearer(tokens["ingest"]),
            )
        text = client.get("/metrics", headers=bearer(tokens["admin"])).text
    labels = {
        (s.name, key, value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        for key, value in s.labels.items()
        if key != "le"
    }
    ingested = {value for name, key, value in labels if name == "verifier_sessions_ingested_total"}
    assert ingested == {"done", "not_done"}
