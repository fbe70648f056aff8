"""The witness endpoint and bound tokens, through the API on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from audit.chain import seal
from audit.jcs import canonicalize
from audit.witness import verify_receipt
from tests.support.api import bearer, make_tokens
from tests.support.report_factory import report_dict
from tests.support.trust import TS, agents_config, evidence_key, trail
from verifier.app.evidence import load_key
from verifier.service.api import create_app
from verifier.store import Store
from verifier.store.tokens import create_token
from verifier.store.witness import witnessed


def lines(*entries: dict[str, Any]) -> bytes:
    return b"".join(canonicalize(e) + b"\n" for e in entries)


@pytest.fixture
def key_path(tmp_path: Path) -> Path:
    return evidence_key(tmp_path)


@pytest.fixture
def client(db_url: str, key_path: Path) -> Iterator[TestClient]:
    config = agents_config(db_url, {}, evidence={"signing_key": str(key_path)})
    with TestClient(create_app(config)) as test_client:
        yield test_client


@pytest.fixture
def tokens(db_url: str) -> dict[str, str]:
    out = make_tokens(db_url)
    with Store.open(db_url) as store:
        out["fixer"] = create_token(
            store, name="fixer", scope="ingest", actor="t", agent="repo-fixer"
        )[1]
    return out


def test_entries_are_witnessed_in_order_and_the_receipt_verifies_with_the_service_key(
    client: TestClient, tokens: dict[str, str], key_path: Path, db_url: str
) -> None:
    entries = trail()
    first = client.post(
        "/v1/sessions/s-1/trail", content=lines(entries[0]), headers=bearer(tokens["ingest"])
    )
    assert first.status_code == 200, first.text
    rest = client.post(
        "/v1/sessions/s-1/trail", content=lines(*entries[1:]), headers=bearer(tokens["ingest"])
    )
    assert rest.status_code == 200, rest.text
    public = load_key(key_path).public_key()
    receipt = verify_receipt(rest.json(), public)
    assert (receipt.session_id, receipt.count, receipt.head_hash) == ("s-1", 3, entries[-1]["hash"])
    assert verify_receipt(first.json(), public).count == 1
    # A receipt changed after signing does not verify.
    forged = json.loads(rest.text)
    forged["receipt"]["count"] = 2
    with pytest.raises(Exception, match="does not match the receipt"):
        verify_receipt(forged, public)
    with Store.open(db_url) as store:
        hashes, received = witnessed(store, "s-1")
    assert hashes == tuple(e["hash"] for e in entries)
    assert received[0] <= received[-1]


def test_an_entry_posted_again_identically_changes_nothing(
    client: TestClient, tokens: dict[str, str]
) -> None:
    entries = trail()
    for _ in range(2):
        answer = client.post(
            "/v1/sessions/s-1/trail", content=lines(*entries[:2]), headers=bearer(tokens["ingest"])
        )
        assert answer.status_code == 200 and answer.json()["receipt"]["count"] == 2


def test_an_entry_that_does_not_extend_the_witnessed_chain_is_a_409_with_its_index(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    entries = trail()
    headers = bearer(tokens["ingest"])
    assert (
        client.post(
            "/v1/sessions/s-1/trail", content=lines(*entries[:2]), headers=headers
        ).status_code
        == 200
    )
    rewritten = trail(n=4)  # another trail of the same session: entry 1 differs
    rewritten[1]["ts"] = TS.format(5)
    answer = client.post(
        "/v1/sessions/s-1/trail", content=lines(*seal("s-1", rewritten)[1:3]), headers=headers
    )
    assert answer.status_code == 409
    body = answer.json()
    assert body["error"]["code"] == "witness_conflict" and body["index"] == 1
    assert "differs from the entry witnessed" in body["error"]["problem"]
    gap = client.post(
        "/v1/sessions/s-1/trail", content=lines(entries[2] | {"seq": 5}), headers=headers
    )
    assert gap.status_code == 409 and gap.json()["index"] == 2
    unlinked = dict(entries[2], prev="0" * 64)
    bad = client.post("/v1/sessions/s-1/trail", content=lines(unlinked), headers=headers)
    assert bad.status_code == 409 and bad.json()["index"] == 2  # its hash no longer matches
    with Store.open(db_url) as store:
        assert len(witnessed(store, "s-1")[0]) == 2


def test_a_trail_body_that_is_not_json_lines_is_a_400_and_read_tokens_are_refused(
    client: TestClient, tokens: dict[str, str]
) -> None:
    answer = client.post(
        "/v1/sessions/s-1/trail", content=b"{not json\n", headers=bearer(tokens["ingest"])
    )
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "entries"
    read = client.post(
        "/v1/sessions/s-1/trail", content=lines(trail()[0]), headers=bearer(tokens["read"])
    )
    assert read.status_code == 403


def test_a_bound_token_posts_only_its_agents_reports(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    other = json.dumps(report_dict("s-9", agent={"name": "someone-else"})).encode()
    refused = client.post("/v1/sessions", content=other, headers=bearer(tokens["fixer"]))
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "forbidden" and error["field"] == "agent.name"
    assert "bound to agent 'repo-fixer'" in error["problem"]
    with Store.open(db_url) as store:
        assert [r.field for r in store.rejected()] == ["agent.name"]
    own = json.dumps(report_dict("s-9")).encode()  # agent repo-fixer
    assert (
        client.post("/v1/sessions", content=own, headers=bearer(tokens["fixer"])).status_code == 202
    )
    # An unbound ingest token still posts any agent's report.
    other2 = json.dumps(report_dict("s-10", agent={"name": "someone-else"})).encode()
    assert (
        client.post("/v1/sessions", content=other2, headers=bearer(tokens["ingest"])).status_code
        == 202
    )


def test_a_bound_token_witnesses_its_own_agents_trail_and_never_another_agents(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    with Store.open(db_url) as store:
        other = create_token(store, name="other", scope="ingest", actor="t", agent="other")[1]
    entries = trail()
    assert (
        client.post(
            "/v1/sessions/s-1/trail", content=lines(entries[0]), headers=bearer(tokens["fixer"])
        ).status_code
        == 200
    )
    # Another agent's token cannot extend repo-fixer's trail: it posts to a trail of its
    # own, where entry 1 has nothing to follow.
    answer = client.post("/v1/sessions/s-1/trail", content=lines(entries[1]), headers=bearer(other))
    assert answer.status_code == 409 and answer.json()["index"] == 0
    with Store.open(db_url) as store:
        assert witnessed(store, "s-1", "repo-fixer")[0] == (entries[0]["hash"],)
        assert witnessed(store, "s-1", "other")[0] == ()
    named = seal("s-2", [{"kind": "session_start", "ts": TS.format(0), "agent": "repo-fixer"}])
    answer = client.post("/v1/sessions/s-2/trail", content=lines(*named), headers=bearer(other))
    error = answer.json()["error"]
    assert answer.status_code == 403 and error["code"] == "foreign_trail"
    assert "session_start names agent 'repo-fixer'" in error["problem"]


def test_only_ingest_tokens_are_bound(db_url: str) -> None:
    from verifier.errors import BadRequest

    with Store.open(db_url) as store, pytest.raises(BadRequest, match="only ingest tokens"):
        create_token(store, name="r", scope="read", actor="t", agent="repo-fixer")


def test_token_create_agent_on_the_command_line(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from verifier.cli import main
    from verifier.errors import BadRequest

    monkeypatch.setenv("VERIFIER_DATABASE_URL", db_url)
    result = CliRunner().invoke(
        main,
        [
            "token",
            "create",
            "--scope",
            "ingest",
            "--name",
            "h",
            "--agent",
            "repo-fixer",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["agent"] == "repo-fixer"
    result = CliRunner().invoke(
        main, ["token", "create", "--scope", "read", "--name", "h", "--agent", "x"]
    )
    assert isinstance(result.exception, BadRequest) and result.exception.field == "agent"
