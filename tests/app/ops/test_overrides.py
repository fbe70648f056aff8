"""Overrides through the faces: `verifier override`, POST /v1/sessions/{id}/override, and
both verdicts wherever a session is shown; the stats say they count computed verdicts."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.support.api import bearer, verification
from tests.support.report_factory import make_report_bytes
from verifier import cli
from verifier.contract.report import parse_report
from verifier.store import Store
from verifier.store.tokens import admin_log


def seed(db_url: str) -> None:
    with Store.open(db_url) as store:
        for sid in ("s1", "s2"):
            store.ingest(parse_report(make_report_bytes(sid, "done")))
        store.record_run(verification("s1", failed=True))
        store.record_run(verification("s2"))


@pytest.fixture
def seeded(client: TestClient, db_url: str) -> TestClient:
    seed(db_url)
    return client


def override(client: TestClient, token: str, session_id: str, **body: object) -> dict[str, object]:
    response = client.post(f"/v1/sessions/{session_id}/override", json=body, headers=bearer(token))
    return {"status": response.status_code, **response.json()}


def test_an_admin_overrides_and_both_verdicts_are_shown(
    seeded: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    stats_before = seeded.get("/v1/stats", headers=bearer(tokens["read"])).json()

    detail = override(seeded, tokens["admin"], "s1", status="delivered", reason="renamed file")

    assert detail["status"] == 200
    assert (detail["delivery_status"], detail["override_status"], detail["effective_status"]) == (
        "not_delivered",
        "delivered",
        "delivered",
    )
    [entry] = detail["overrides"]  # type: ignore[misc]
    assert (entry["author"], entry["status"], entry["reason"]) == (
        "token:admin-token",
        "delivered",
        "renamed file",
    )
    listing = seeded.get("/v1/sessions", headers=bearer(tokens["read"])).json()["sessions"]
    shown = {
        s["session_id"]: (s["delivery_status"], s["override_status"], s["effective_status"])
        for s in listing
    }
    assert shown == {
        "s1": ("not_delivered", "delivered", "delivered"),
        "s2": ("delivered", None, "delivered"),
    }
    stats = seeded.get("/v1/stats", headers=bearer(tokens["read"])).json()
    assert (stats["verdicts"], stats["overridden"]) == ("computed", 1)
    assert stats_before["overridden"] == 0
    counts = ("total", "delivered", "not_delivered", "silent_failures", "delivered_rate")
    assert {k: stats[k] for k in counts} == {k: stats_before[k] for k in counts}
    assert stats["silent_failures"] == 1
    with Store.open(db_url) as store:
        assert any(e.action == "session.override" and e.subject == "s1" for e in admin_log(store))


def test_cleared_withdraws_and_the_history_stays(
    seeded: TestClient, tokens: dict[str, str]
) -> None:
    override(seeded, tokens["admin"], "s2", status="not_delivered", reason="reverted later")
    detail = override(seeded, tokens["admin"], "s2", status="cleared", reason="not reverted")
    assert (detail["override_status"], detail["effective_status"]) == (None, "delivered")
    assert [o["status"] for o in detail["overrides"]] == ["not_delivered", "cleared"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("scope", ["read", "ingest", "export"])
def test_only_admin_may_override(seeded: TestClient, tokens: dict[str, str], scope: str) -> None:
    got = override(seeded, tokens[scope], "s1", status="delivered", reason="r")
    assert got["status"] == 403 and got["error"]["code"] == "forbidden"  # type: ignore[index]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"status": "maybe", "reason": "r"}, "status"),
        ({"status": "delivered", "reason": ""}, "reason"),
        ({"status": "delivered", "reason": "   "}, "reason"),
        ({"status": "delivered"}, "reason"),
        ({"status": "delivered", "reason": "r", "author": "someone else"}, "author"),
    ],
)
def test_a_bad_override_is_a_400_naming_the_field(
    seeded: TestClient, tokens: dict[str, str], body: dict[str, str], field: str
) -> None:
    got = override(seeded, tokens["admin"], "s1", **body)
    assert got["status"] == 400
    assert got["error"]["code"] == "bad_request" and got["error"]["field"] == field  # type: ignore[index]


def test_overriding_an_unknown_session_is_a_404(seeded: TestClient, tokens: dict[str, str]) -> None:
    got = override(seeded, tokens["admin"], "nope", status="delivered", reason="r")
    assert got["status"] == 404 and got["error"]["code"] == "not_found"  # type: ignore[index]


# -- the command line ----------------------------------------------------------------


@pytest.fixture
def local(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path}/cli.sqlite3"
    monkeypatch.setenv("VERIFIER_DATABASE_URL", url)
    seed(url)
    yield url


def test_the_command_line_overrides_and_shows_both_verdicts(
    local: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert (
        cli.run(
            [
                "override",
                "s1",
                "--status",
                "delivered",
                "--reason",
                "a.py moved",
                "--format",
                "json",
            ]
        )
        == 0
    )
    made = json.loads(capsys.readouterr().out)
    assert made["override"]["author"].startswith("cli:")
    assert (made["delivery_status"], made["override_status"], made["effective_status"]) == (
        "not_delivered",
        "delivered",
        "delivered",
    )

    assert cli.run(["show", "s1", "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["delivery_status"], shown["override_status"], shown["effective_status"]) == (
        "not_delivered",
        "delivered",
        "delivered",
    )
    assert [o["reason"] for o in shown["overrides"]] == ["a.py moved"]

    assert cli.run(["show", "s1"]) == 0
    text = capsys.readouterr().out
    assert "verdict: " in text and "override: " in text and "a.py moved" in text

    assert cli.run(["list", "--format", "json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    by_id = {s["session_id"]: s for s in listing["sessions"]}
    assert (by_id["s1"]["override_status"], by_id["s1"]["effective_status"]) == (
        "delivered",
        "delivered",
    )
    assert (listing["rates"]["verdicts"], listing["rates"]["overridden"]) == ("computed", 1)
    assert listing["rates"]["not_delivered"] == 1  # the computed verdict is what is counted

    assert cli.run(["list"]) == 0
    text = capsys.readouterr().out
    assert "overridden: delivered" in text
    assert "the rates count computed verdicts: 1 session carries a person's override" in text


def test_the_command_line_refuses_a_bad_override(
    local: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.run(["override", "nope", "--status", "delivered", "--reason", "r"]) != 0
    assert "nope" in capsys.readouterr().err
    assert cli.run(["override", "s1", "--status", "delivered", "--reason", " "]) != 0
    assert "reason" in capsys.readouterr().err
    assert cli.run(["override", "s1", "--status", "maybe", "--reason", "r"]) == 2
