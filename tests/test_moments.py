"""verifier.moments: the one parser of typed moments and the one UTC formatter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from verifier.errors import BadRequest
from verifier.moments import parse_end, parse_moment, utc_text

NOON = datetime(2026, 11, 29, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    "typed",
    [
        "2026-11-29T12:00:00Z",
        "2026-11-29T12:00:00z",
        "2026-11-29T14:00:00+02:00",
        " 2026-11-29T12:00Z ",
    ],
)
def test_a_time_with_its_offset_is_read_in_utc(typed: str) -> None:
    moment = parse_moment(typed, "--since")
    assert moment == NOON and moment.tzinfo is UTC


def test_a_date_is_its_midnight_in_utc() -> None:
    assert parse_moment("2026-11-29", "--from") == datetime(2026, 11, 29, tzinfo=UTC)


@pytest.mark.parametrize(
    ("typed", "problem"),
    [
        ("yesterday", "is not a date or an ISO 8601 date and time"),
        ("2026-13-01", "is not a date or an ISO 8601 date and time"),
        ("2026-11-29T10:00:00", "has no UTC offset"),
        ("0001-01-01T00:00:00+01:00", "is out of range once in UTC"),
    ],
)
def test_a_bad_moment_names_the_field_and_the_problem(typed: str, problem: str) -> None:
    with pytest.raises(BadRequest) as raised:
        parse_moment(typed, "--until")
    assert raised.value.field == "--until" and problem in raised.value.problem


def test_an_end_that_is_a_date_names_its_whole_day_and_a_time_is_itself() -> None:
    assert parse_end(" 2026-11-29 ", "to") == datetime(2026, 11, 30, tzinfo=UTC)
    assert parse_end("2026-11-29T12:00:00Z", "to") == NOON
    with pytest.raises(BadRequest) as raised:
        parse_end("9999-12-31", "to")
    assert raised.value.field == "to" and "the last day a date can name" in str(raised.value)


def test_utc_text_writes_utc_with_a_z_and_takes_a_naive_time_as_utc() -> None:
    assert utc_text(NOON.astimezone(timezone(timedelta(hours=-5)))) == "2026-11-29T12:00:00Z"
    assert utc_text(NOON.replace(tzinfo=None)) == "2026-11-29T12:00:00Z"
    assert utc_text(NOON, timespec="microseconds") == "2026-11-29T12:00:00.000000Z"
    assert utc_text(None) is None
