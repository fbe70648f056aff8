"""`GET /v1/stats` takes `from` and `to` in the forms every face takes a moment
(`verifier.moments.parse_moment`): a date, a date and time with its offset, `Z`. A `to`
that is a date is that whole day; one with a time is the moment the sessions ended
before, as `GET /v1/sessions` reads it. Days stay UTC days under a bound within one."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.support.api import bearer, verification
from tests.support.report_factory import make_report_bytes
from verifier.contract.report import parse_report
from verifier.store import Store
from verifier.store.overrides import record_override

# When each session ended (UTC): three on the 20th, one on the 21st.
ENDED = {
    "early": "2026-11-20T06:00:00Z",
    "noon": "2026-11-20T12:00:00Z",
    "late": "2026-11-20T18:00:00Z",
    "next": "2026-11-21T12:00:00Z",
}


@pytest.fixture
def read(client: TestClient, tokens: dict[str, str], db_url: str) -> dict[str, str]:
    with Store.open(db_url) as store:
        for session_id, ended in ENDED.items():
            started = ended[:11] + "00:00:00Z"
            store.ingest(
                parse_report(make_report_bytes(session_id, ended_at=ended, started_at=started))
            )
            store.record_run(verification(session_id, failed=session_id == "late"))
        record_override(store, "late", status="delivered", reason="read it", author="cli:al")
    return bearer(tokens["read"])


def stats(client: TestClient, read: dict[str, str], **params: str) -> dict[str, object]:
    response = client.get("/v1/stats", params=params, headers=read)
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


@pytest.mark.parametrize(
    ("params", "total"),
    [
        ({"from": "2026-11-20", "to": "2026-11-20"}, 3),  # a date `to`: its whole day
        ({"from": "2026-11-21"}, 1),
        ({"from": "2026-11-20T10:00:00Z"}, 3),
        ({"from": "2026-11-20T10:00:00z"}, 3),
        ({"from": "2026-11-20T12:00:00+02:00"}, 3),  # 10:00 UTC
        ({"from": "2026-11-20T12:00:00Z"}, 3),  # at or after: noon counts
        ({"to": "2026-11-20T12:00:00Z"}, 1),  # before: noon does not
        ({"to": "2026-11-20T07:00:01-05:00"}, 2),  # 12:00:01 UTC: noon is before it
        ({"from": "2026-11-20T10:00:00Z", "to": "2026-11-21"}, 3),
        ({"from": "2026-11-20T10:00:00Z", "to": "2026-11-20T19:00:00+01:00"}, 1),
    ],
)
def test_from_and_to_take_a_date_a_moment_with_its_offset_or_z(
    client: TestClient, read: dict[str, str], params: dict[str, str], total: int
) -> None:
    assert stats(client, read, **params)["total"] == total
    # The sessions list reads a moment the same way: the same sessions.
    if all(len(v) > 10 for v in params.values()):
        listed = client.get("/v1/sessions", params=params, headers=read).json()["sessions"]
        assert len(listed) == total


def test_a_bound_within_a_day_groups_by_the_day_each_session_ended(
    client: TestClient, read: dict[str, str]
) -> None:
    cut = {"from": "2026-11-20T10:00:00Z", "to": "2026-11-21T15:00:00+02:00"}
    days = stats(client, read, group_by="day", **cut)["groups"]
    assert [(g["key"], g["total"]) for g in days] == [("2026-11-20", 2), ("2026-11-21", 1)]  # type: ignore[attr-defined, index]
    weeks = stats(client, read, group_by="week", **cut)["groups"]
    assert [(g["key"], g["total"]) for g in weeks] == [("2026-11-16", 3)]  # type: ignore[attr-defined, index]
    # The overridden count is of the same span: the late session carries one.
    assert stats(client, read, **cut)["overridden"] == 1
    assert stats(client, read, to="2026-11-20T12:00:00Z")["overridden"] == 0


@pytest.mark.parametrize(
    ("params", "field", "says"),
    [
        ({"from": "yesterday"}, "from", "is not a date or an ISO 8601 date and time"),
        ({"to": "2026-11-20T10:00:00"}, "to", "has no UTC offset"),
        ({"to": "2026-02-30"}, "to", "is not a date"),
        ({"from": "2026-11-21", "to": "2026-11-20"}, "from", "before to="),
        ({"from": "2026-11-20T12:00:00Z", "to": "2026-11-20T14:00:00+02:00"}, "from", "before"),
        ({"to": "9999-12-31"}, "to", "the last day a date can name"),
    ],
)
def test_a_bad_from_or_to_is_a_400_naming_it(
    client: TestClient, read: dict[str, str], params: dict[str, str], field: str, says: str
) -> None:
    response = client.get("/v1/stats", params=params, headers=read)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("bad_request", field)
    assert says in error["problem"]
