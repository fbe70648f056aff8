"""Every endpoint and every error status, through FastAPI's TestClient (the app's
lifespan runs; a real SQLite file or a PostgreSQL database of its own)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.support.api import RecordingQueue, bearer, make_config, make_tokens, verification
from tests.support.report_factory import make_report_bytes, report_dict
from verifier.service.api import create_app
from verifier.store import Store
from verifier.store.tokens import admin_log, list_tokens, revoke_token

LIMIT = 64 * 1024


def post(client: TestClient, body: bytes, token: str) -> tuple[int, dict[str, object]]:
    response = client.post("/v1/sessions", content=body, headers=bearer(token))
    return response.status_code, response.json()


def error_of(response_json: dict[str, object]) -> dict[str, object]:
    """The one error shape: {"error": {"code", "field", "problem"}}."""
    error = response_json["error"]
    assert isinstance(error, dict) and set(error) == {"code", "field", "problem"}
    return error


# -- POST /v1/sessions ------------------------------------------------------------------


def test_a_new_report_is_accepted_as_pending_and_queued_once(
    client: TestClient, tokens: dict[str, str], queue: RecordingQueue
) -> None:
    raw = make_report_bytes("s-new")
    status, body = post(client, raw, tokens["ingest"])
    assert status == 202
    assert body == {"session_id": "s-new", "status": "pending", "url": "/v1/sessions/s-new"}
    assert post(client, raw, tokens["ingest"])[0] == 200
    assert queue.jobs == [("s-new", "ingest")]
    shown = client.get("/v1/sessions/s-new", headers=bearer(tokens["read"])).json()
    assert shown["delivery_status"] == "pending" and shown["runs"] == [] and shown["checks"] == {}


class _BrokenQueue(RecordingQueue):
    def on_insert(self, session_id: str, reason: str) -> None:
        raise RuntimeError("the queue's secret detail")


def test_a_bug_behind_an_ingest_is_a_500_in_the_one_shape_its_detail_kept_for_the_log(
    db_url: str, tokens: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(make_config(db_url), _BrokenQueue())
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post(
            "/v1/sessions", content=make_report_bytes("s-bug"), headers=bearer(tokens["ingest"])
        )
    assert response.status_code == 500
    assert error_of(response.json())["code"] == "internal"
    assert "secret" not in response.text
    assert "the queue's secret detail" in caplog.text
    with Store.open(db_url) as store:
        assert [row.session.session_id for row in store.sessions()] == []


def test_the_same_bytes_again_answer_200_with_the_session_as_it_stands(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    raw = make_report_bytes("s-again")
    assert post(client, raw, tokens["ingest"])[0] == 202
    with Store.open(db_url) as store:
        store.record_run(verification("s-again"))
    status, body = post(client, raw, tokens["ingest"])
    assert status == 200
    assert body["session_id"] == "s-again" and body["delivery_status"] == "delivered"
    assert [run["delivery_status"] for run in body["runs"]] == ["delivered"]  # type: ignore[union-attr]


def test_other_bytes_under_a_stored_session_id_are_a_409_and_the_first_report_stands(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    first = make_report_bytes("s-dup", "done")
    other = make_report_bytes("s-dup", "error")
    assert post(client, first, tokens["ingest"])[0] == 202
    status, body = post(client, other, tokens["ingest"])
    assert status == 409
    error = error_of(body)
    assert error["code"] == "conflict" and error["field"] == "session_id"
    assert hashlib.sha256(first).hexdigest() in str(error["problem"])
    with Store.open(db_url) as store:
        assert store.report_bytes("s-dup") == first


def test_an_ingest_token_revoked_elsewhere_is_refused_at_its_next_post_and_stores_nothing(
    client: TestClient, tokens: dict[str, str], db_url: str, queue: RecordingQueue
) -> None:
    # The server answers a post, then `verifier token revoke` runs in another process
    # (here another store on the same database): the very next post is refused.
    assert post(client, make_report_bytes("s-before"), tokens["ingest"])[0] == 202
    with Store.open(db_url) as store:
        [row] = [t for t in list_tokens(store) if t.scope == "ingest"]
        revoke_token(store, row.id, actor="test")
    status, body = post(client, make_report_bytes("s-after"), tokens["ingest"])
    assert status == 401 and "revoked" in str(error_of(body)["problem"])
    with Store.open(db_url) as store:
        assert [s.session.session_id for s in store.sessions()] == ["s-before"]
    assert queue.jobs == [("s-before", "ingest")]


def test_an_invalid_report_is_a_400_naming_the_field_and_kept_for_an_admin(
    client: TestClient, tokens: dict[str, str]
) -> None:
    doc = report_dict("s-bad")
    del doc["repo"]["base_commit"]
    raw = json.dumps(doc).encode()
    status, body = post(client, raw, tokens["ingest"])
    assert status == 400
    error = error_of(body)
    assert error["code"] == "invalid_report" and error["field"] == "repo.base_commit"

    admin = bearer(tokens["admin"])
    listed = client.get("/v1/rejected", headers=admin).json()["rejected"]
    assert [(r["field"], r["report_sha256"], r["source"]) for r in listed] == [
        ("repo.base_commit", hashlib.sha256(raw).hexdigest(), "api:token:ingest-token")
    ]
    kept = client.get(listed[0]["url"], headers=admin)
    assert kept.status_code == 200 and kept.content == raw
    assert kept.headers["content-type"] == "application/octet-stream"


def test_a_report_with_nul_in_a_stored_field_is_a_400_naming_it(
    client: TestClient, tokens: dict[str, str]
) -> None:
    doc = report_dict("s-nul")
    doc["agent"]["name"] = "repo\u0000fixer"
    status, body = post(client, json.dumps(doc).encode(), tokens["ingest"])
    assert status == 400 and error_of(body)["field"] == "agent.name"


def test_a_claimed_path_with_a_control_character_is_a_400_naming_the_claim_and_kept(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    change = {"path": "a.py", "action": "create", "sha256_before": None, "sha256_after": "a" * 64}
    hostile = dict(change, path="calc.py\n::add-mask::x")
    raw = json.dumps(report_dict("s-ctl", changes=[change, hostile])).encode()
    status, body = post(client, raw, tokens["ingest"])
    assert status == 400
    error = error_of(body)
    assert (error["code"], error["field"]) == ("invalid_report", "changes.1.path")
    assert str(error["problem"]).startswith("control character U+000A at offset 7")
    with Store.open(db_url) as store:
        [rejected] = store.rejected()
        assert rejected.field == "changes.1.path"
        assert rejected.report_sha256 == hashlib.sha256(raw).hexdigest()
    # The session id stays free.
    assert client.get("/v1/sessions/s-ctl", headers=bearer(tokens["read"])).status_code == 404


def test_bytes_that_are_not_json_are_a_400_on_the_whole_document(
    client: TestClient, tokens: dict[str, str]
) -> None:
    status, body = post(client, b"\xff\xfe not json", tokens["ingest"])
    assert status == 400 and error_of(body)["field"] == "$"


def test_a_declared_length_over_the_limit_is_refused_before_reading(
    client: TestClient, tokens: dict[str, str]
) -> None:
    raw = b"x" * (LIMIT + 1)
    response = client.post("/v1/sessions", content=raw, headers=bearer(tokens["ingest"]))
    assert response.status_code == 413
    error = error_of(response.json())
    assert error["code"] == "too_large" and str(LIMIT) in str(error["problem"])
    # Nothing was read, so nothing is kept.
    assert client.get("/v1/rejected", headers=bearer(tokens["admin"])).json()["rejected"] == []


def test_a_streamed_body_over_the_limit_is_413_with_its_head_and_hash_kept(
    client: TestClient, tokens: dict[str, str]
) -> None:
    chunks = [b"{" + b" " * 40_000, b" " * 40_000, b"z" * 40_000]
    whole = b"".join(chunks)

    def stream() -> Iterator[bytes]:  # no Content-Length: chunked
        yield from chunks

    response = client.post("/v1/sessions", content=stream(), headers=bearer(tokens["ingest"]))
    assert response.status_code == 413
    assert error_of(response.json())["code"] == "too_large"
    admin = bearer(tokens["admin"])
    (kept,) = client.get("/v1/rejected", headers=admin).json()["rejected"]
    assert kept["report_size"] == len(whole)
    assert kept["report_sha256"] == hashlib.sha256(whole).hexdigest()
    head = client.get(kept["url"], headers=admin).content
    assert whole.startswith(head) and 0 < len(head) < len(whole)


# -- GET /v1/sessions/{id} ----------------------------------------------------------------


def test_a_session_shows_its_verdict_checks_and_every_run(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    post(client, make_report_bytes("s-runs"), tokens["ingest"])
    with Store.open(db_url) as store:
        first = store.record_run(verification("s-runs", failed=True))
        second = store.record_run(verification("s-runs", error=True))
    body = client.get("/v1/sessions/s-runs", headers=bearer(tokens["read"])).json()
    assert body["session_id"] == "s-runs" and body["done"] is True
    assert body["agent_status"] == "done"
    # An inconclusive re-run never hides the earlier verdict.
    assert body["delivery_status"] == "not_delivered"
    assert body["verdict_run_id"] == first and body["latest_run_id"] == second
    assert [(r["id"], r["delivery_status"]) for r in body["runs"]] == [
        (first, "not_delivered"),
        (second, "inconclusive"),
    ]
    assert body["runs"][0]["checks"] == {"changes": "fail", "tests": "pass", "audit": "pass"}
    assert body["runs"][0]["verified_at"].endswith("Z")
    assert body["checks"]["changes"]["findings"][0]["code"] == "change.missing"
    assert body["agent"]["name"] == "repo-fixer" and body["repo"]["name"] == "calc"


def test_an_unknown_session_is_a_404(client: TestClient, tokens: dict[str, str]) -> None:
    response = client.get("/v1/sessions/nope", headers=bearer(tokens["read"]))
    assert response.status_code == 404
    assert error_of(response.json())["code"] == "not_found"


# -- GET /v1/sessions ---------------------------------------------------------------------


def ingest_varied(client: TestClient, token: str) -> None:
    """Six sessions: two agents, two models, done and not, ending a day apart."""
    for n in range(6):
        raw = make_report_bytes(
            f"s-{n}",
            "done" if n % 2 == 0 else "error",
            agent={"name": "alpha" if n < 3 else "beta", "model": f"m{n % 2}"},
            ended_at=f"2026-11-2{n}T12:00:00Z",
            started_at=f"2026-11-2{n}T11:00:00Z",
        )
        assert post(client, raw, token)[0] == 202


def ids(client: TestClient, token: str, query: str) -> list[str]:
    response = client.get(f"/v1/sessions?{query}", headers=bearer(token))
    assert response.status_code == 200, response.text
    return [s["session_id"] for s in response.json()["sessions"]]


def test_sessions_are_listed_newest_first_and_filtered(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    ingest_varied(client, tokens["ingest"])
    with Store.open(db_url) as store:
        store.record_run(verification("s-4"))
    read = tokens["read"]
    assert ids(client, read, "") == ["s-5", "s-4", "s-3", "s-2", "s-1", "s-0"]
    assert ids(client, read, "agent=alpha") == ["s-2", "s-1", "s-0"]
    assert ids(client, read, "model=m1") == ["s-5", "s-3", "s-1"]
    assert ids(client, read, "done=true") == ["s-4", "s-2", "s-0"]
    assert ids(client, read, "agent_status=error&agent=beta") == ["s-5", "s-3"]
    assert ids(client, read, "delivery_status=delivered") == ["s-4"]
    assert ids(client, read, "repo=calc&limit=2") == ["s-5", "s-4"]
    assert ids(client, read, "repo=other") == []
    assert ids(client, read, "from=2026-11-22T00:00:00Z&to=2026-11-24T00:00:00Z") == ["s-3", "s-2"]
    # A plain date is its midnight UTC, as on the command line (verifier.moments).
    assert ids(client, read, "from=2026-11-22&to=2026-11-24") == ["s-3", "s-2"]
    assert ids(client, read, "from=2026-11-22T01:00:00%2B01:00&to=2026-11-24") == ["s-3", "s-2"]


def test_sessions_are_searched_by_id_branch_or_commit_and_filtered_by_finding(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    head = "ab12" + "0" * 36
    for sid, branch, commit in (
        ("Fix-Calc-1", "feature/Login", None),
        ("fix-shop-2", "main", head),
        ("other-3", None, None),
    ):
        repo = {"name": "calc", "base_commit": "c" * 40, "head_commit": commit}
        if branch:
            repo["branch"] = branch
        assert post(client, make_report_bytes(sid, repo=repo), tokens["ingest"])[0] == 202
    with Store.open(db_url) as store:
        store.record_run(verification("Fix-Calc-1", failed=True))
        store.record_run(verification("fix-shop-2", error=True))
        store.record_run(verification("other-3"))
    read = tokens["read"]
    # Part of the id or the branch, in any case; the start of a commit, never its middle.
    assert ids(client, read, "q=FIX-") == ["fix-shop-2", "Fix-Calc-1"]
    assert ids(client, read, "q=login") == ["Fix-Calc-1"]
    assert ids(client, read, "q=AB12") == ["fix-shop-2"]
    assert ids(client, read, "q=ccc") == ["other-3", "fix-shop-2", "Fix-Calc-1"]
    assert ids(client, read, "q=0000") == []
    # LIKE's wildcards are searched as themselves.
    assert ids(client, read, "q=%25") == [] and ids(client, read, "q=_") == []
    # By the findings of the run each verdict shows.
    assert ids(client, read, "check=changes") == ["Fix-Calc-1"]
    assert ids(client, read, "check=changes&code=change.missing") == ["Fix-Calc-1"]
    assert ids(client, read, "check=tests&code=tests.no_command") == ["fix-shop-2"]
    assert ids(client, read, "check=tests&code=change.missing") == []
    assert ids(client, read, "check=audit") == []
    assert ids(client, read, "check=changes&q=shop") == []


@pytest.mark.parametrize("path", ["/v1/sessions", "/v1/export/sessions"])
def test_a_code_without_its_check_or_a_search_too_long_is_a_400(
    client: TestClient, tokens: dict[str, str], path: str
) -> None:
    # The export is refused before its first row streams, as the listing is.
    for query, field in (
        ("code=change.missing", "code"),
        ("code=x&check=", "code"),
        ("q=" + "x" * 201, "q"),
    ):
        response = client.get(f"{path}?{query}", headers=bearer(tokens["admin"]))
        assert response.status_code == 400, response.text
        assert error_of(response.json())["field"] == field


def test_a_forged_cursor_holding_nul_is_a_400(client: TestClient, tokens: dict[str, str]) -> None:
    import base64

    position = json.dumps(["2026-11-29T10:00:00+00:00", "s\u0000x"]).encode()
    cursor = base64.urlsafe_b64encode(position).decode()
    response = client.get(f"/v1/sessions?cursor={cursor}", headers=bearer(tokens["read"]))
    assert response.status_code == 400 and error_of(response.json())["field"] == "cursor"


def test_pages_follow_the_cursor_to_the_end_without_repeats(
    client: TestClient, tokens: dict[str, str]
) -> None:
    ingest_varied(client, tokens["ingest"])
    seen: list[str] = []
    cursor = None
    while True:
        query = "limit=4" + (f"&cursor={cursor}" if cursor else "")
        page = client.get(f"/v1/sessions?{query}", headers=bearer(tokens["read"])).json()
        seen += [s["session_id"] for s in page["sessions"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["s-5", "s-4", "s-3", "s-2", "s-1", "s-0"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=many", "limit"),
        ("done=perhaps", "done"),
        ("delivery_status=great", "delivery_status"),
        ("from=yesterday", "from"),
        ("from=2026-13-01", "from"),  # not a date
        ("to=2026-11-29T10:00:00", "to"),  # no UTC offset
        ("cursor=not-a-cursor", "cursor"),
        ("agent=a%00b", "agent"),  # PostgreSQL text cannot hold NUL
        ("from=0001-01-01T00:00:00%2B01:00", "from"),  # before year 1 in UTC
    ],
)
def test_a_bad_filter_is_a_400_naming_the_parameter(
    client: TestClient, tokens: dict[str, str], query: str, field: str
) -> None:
    response = client.get(f"/v1/sessions?{query}", headers=bearer(tokens["read"]))
    assert response.status_code == 400, response.text
    error = error_of(response.json())
    assert error["code"] == "bad_request" and error["field"] == field


# -- POST /v1/sessions/{id}/verify ----------------------------------------------------------


def test_reverify_logs_the_act_then_queues_the_session(
    client: TestClient, tokens: dict[str, str], queue: RecordingQueue, db_url: str
) -> None:
    post(client, make_report_bytes("s-re"), tokens["ingest"])
    queue.jobs.clear()  # what ingest queued is not what this test is about
    response = client.post("/v1/sessions/s-re/verify", headers=bearer(tokens["admin"]))
    assert response.status_code == 202
    assert response.json() == {"session_id": "s-re", "status": "queued", "url": "/v1/sessions/s-re"}
    assert queue.jobs == [("s-re", "reverify")]
    with Store.open(db_url) as store:
        (entry, *_) = admin_log(store)
    assert (entry.actor, entry.action, entry.subject) == (
        "token:admin-token",
        "session.reverify",
        "s-re",
    )


def test_reverifying_an_unknown_session_is_a_404_and_neither_logged_nor_queued(
    client: TestClient, tokens: dict[str, str], queue: RecordingQueue, db_url: str
) -> None:
    response = client.post("/v1/sessions/ghost/verify", headers=bearer(tokens["admin"]))
    assert response.status_code == 404
    assert queue.jobs == []
    with Store.open(db_url) as store:
        assert [e.action for e in admin_log(store)] == ["token.create"] * 4


def test_reverifying_a_pruned_session_is_a_410_and_neither_logged_nor_queued(
    client: TestClient, tokens: dict[str, str], queue: RecordingQueue, db_url: str
) -> None:
    from datetime import UTC, datetime

    from verifier.store.maintenance import prune

    post(client, make_report_bytes("s-old"), tokens["ingest"])
    queue.jobs.clear()
    with Store.open(db_url) as store:
        store.record_run(verification("s-old"))  # only verified sessions are pruned
        prune(store, datetime(2026, 11, 30, tzinfo=UTC), actor="cli:test")
        logged = len(admin_log(store))
    response = client.post("/v1/sessions/s-old/verify", headers=bearer(tokens["admin"]))
    assert response.status_code == 410
    error = error_of(response.json())
    assert error["code"] == "pruned" and "pruned" in str(error["problem"])
    assert queue.jobs == []
    with Store.open(db_url) as store:
        assert len(admin_log(store)) == logged
    # The verdict is still there to read.
    shown = client.get("/v1/sessions/s-old", headers=bearer(tokens["read"])).json()
    assert shown["delivery_status"] == "delivered"


def test_reverify_without_a_queue_is_a_503(sqlite_url: str) -> None:
    tokens = make_tokens(sqlite_url)
    with TestClient(create_app(make_config(sqlite_url))) as client:
        post(client, make_report_bytes("s-1"), tokens["ingest"])
        response = client.post("/v1/sessions/s-1/verify", headers=bearer(tokens["admin"]))
    assert response.status_code == 503
    error = error_of(response.json())
    assert error["code"] == "unavailable" and "without one" in str(error["problem"])


# -- GET /v1/stats --------------------------------------------------------------------------


def test_stats_count_done_against_delivered_and_group(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    ingest_varied(client, tokens["ingest"])
    with Store.open(db_url) as store:
        store.record_run(verification("s-0"))  # done, delivered
        store.record_run(verification("s-2", failed=True))  # done, not delivered
        store.record_run(verification("s-1", error=True))  # not done, inconclusive
    read = bearer(tokens["read"])
    body = client.get("/v1/stats", headers=read).json()
    assert {k: body[k] for k in ("total", "done", "delivered", "not_delivered")} == {
        "total": 6,
        "done": 3,
        "delivered": 1,
        "not_delivered": 1,
    }
    assert (body["inconclusive"], body["pending"], body["silent_failures"]) == (1, 3, 1)
    assert body["delivered_rate"] == 0.5 and body["done_rate"] == 1.0
    assert body["groups"] == []

    grouped = client.get("/v1/stats?group_by=agent", headers=read).json()
    assert {g["key"]: g["total"] for g in grouped["groups"]} == {"alpha": 3, "beta": 3}
    ranged = client.get("/v1/stats?from=2026-11-20&to=2026-11-21", headers=read).json()
    assert ranged["total"] == 2 and ranged["delivered"] == 1


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("group_by=hour", "group_by"),
        ("from=2026-13-01", "from"),
        ("from=2026-11-02&to=2026-11-01", "from"),
    ],
)
def test_bad_stats_parameters_are_a_400_naming_them(
    client: TestClient, tokens: dict[str, str], query: str, field: str
) -> None:
    response = client.get(f"/v1/stats?{query}", headers=bearer(tokens["read"]))
    assert response.status_code == 400
    assert error_of(response.json())["field"] == field


# -- GET /v1/rejected -------------------------------------------------------------------------


def test_rejected_bodies_page_newest_first(client: TestClient, tokens: dict[str, str]) -> None:
    for n in range(3):
        post(client, f"not json {n}".encode(), tokens["ingest"])
    admin = bearer(tokens["admin"])
    first = client.get("/v1/rejected?limit=2", headers=admin).json()
    assert len(first["rejected"]) == 2 and first["next_before"] is not None
    rest = client.get(f"/v1/rejected?limit=2&before={first['next_before']}", headers=admin).json()
    assert len(rest["rejected"]) == 1 and rest["next_before"] is None
    bodies = [
        client.get(r["url"], headers=admin).content for r in first["rejected"] + rest["rejected"]
    ]
    assert bodies == [b"not json 2", b"not json 1", b"not json 0"]


def test_an_unknown_rejected_body_is_a_404(client: TestClient, tokens: dict[str, str]) -> None:
    response = client.get("/v1/rejected/999", headers=bearer(tokens["admin"]))
    assert response.status_code == 404 and error_of(response.json())["code"] == "not_found"


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/rejected/4294967296", "rejected_id"),  # ids are 32-bit on PostgreSQL
        ("/v1/rejected?before=4294967296", "before"),
        ("/v1/sessions/a%00b", "session_id"),
        ("/v1/sessions/" + "x" * 129, "session_id"),
    ],
)
def test_ids_no_database_could_hold_are_a_400_not_a_query(
    client: TestClient, tokens: dict[str, str], path: str, field: str
) -> None:
    response = client.get(path, headers=bearer(tokens["admin"]))
    assert response.status_code == 400, response.text
    assert error_of(response.json())["field"] == field


# -- probes, and what is not a route -----------------------------------------------------------


def test_healthz_and_readyz_need_no_token(client: TestClient) -> None:
    assert client.get("/healthz").json()["status"] == "ok"
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready",
        "checks": {"database": "ok", "migrations": "ok", "queue": "ok"},
    }


def test_readyz_is_503_with_the_reason_when_the_queue_is_unreachable(
    client: TestClient, queue: RecordingQueue
) -> None:
    queue.down = "the job queue cannot be reached: OperationalError"
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert error_of(body)["code"] == "not_ready"
    assert body["checks"]["queue"] == queue.down and body["checks"]["database"] == "ok"


def test_an_unknown_route_and_a_wrong_method_use_the_error_shape(client: TestClient) -> None:
    missing = client.get("/v2/nothing")
    assert missing.status_code == 404 and error_of(missing.json())["code"] == "not_found"
    wrong = client.delete("/v1/sessions")
    assert wrong.status_code == 405 and error_of(wrong.json())["code"] == "method_not_allowed"


# -- pinned shapes ---------------------------------------------------------------------------

PINNED_SESSION = {"session_id", "agent_status", "done", "delivery_status", "verified_at", "url"}


def test_listed_and_shown_sessions_carry_the_pinned_keys(
    client: TestClient, tokens: dict[str, str]
) -> None:
    post(client, make_report_bytes("s-keys"), tokens["ingest"])
    read = bearer(tokens["read"])
    (item,) = client.get("/v1/sessions", headers=read).json()["sessions"]
    shown = client.get("/v1/sessions/s-keys", headers=read).json()
    assert set(item) >= PINNED_SESSION
    assert set(shown) >= PINNED_SESSION | {"checks", "runs"}
    assert {k: shown[k] for k in item} == item  # the detail is the summary and more


def test_the_openapi_document_describes_the_report_body_and_every_error(
    client: TestClient,
) -> None:
    document = client.get("/openapi.json").json()
    body = document["paths"]["/v1/sessions"]["post"]["requestBody"]["content"]
    assert body["application/json"]["schema"] == {"$ref": "#/components/schemas/SessionReport"}
    assert "SessionReportAgent" in document["components"]["schemas"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            # FastAPI's own 422 never appears: parameters that do not validate are our 400.
            # The one 422 is a report naming a task nobody declared, in our error shape.
            if "422" in codes:
                assert (method, path) == ("post", "/v1/sessions")
                declared = operation["responses"]["422"]["content"]["application/json"]
                assert declared["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
            if operation.get("security"):
                assert {"401", "403"} <= codes, (method, path)
