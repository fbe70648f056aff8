"""Moments in time as people type them and as the verifier writes them: one parser, one
formatter, for every face (the command line's date options, the store's cutoffs, the
exports, the evidence).

A moment is typed as a date (``2026-11-29``: its midnight, UTC) or as an ISO 8601
date and time with its UTC offset (``2026-11-29T10:00:00Z``, ``…+02:00``); a time
without an offset is refused, never guessed. It is written in UTC with a ``Z``.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import overload

from verifier.errors import BadRequest

__all__ = ["parse_end", "parse_moment", "utc_text"]


def parse_moment(value: str, field: str) -> datetime:
    """`value` as an aware datetime in UTC; `BadRequest` naming `field` when it is neither
    a date nor an ISO 8601 date and time with a UTC offset."""
    text = value.strip()
    try:
        if _is_date(text):
            return datetime.combine(date.fromisoformat(text), time(0), tzinfo=UTC)
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise BadRequest(
            field,
            f"{value!r} is not a date or an ISO 8601 date and time: give YYYY-MM-DD "
            "(midnight UTC) or a time with its offset, e.g. 2026-11-29T10:00:00Z",
        ) from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise BadRequest(field, f"{value!r} has no UTC offset: add Z or +HH:MM, or give a date")
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise BadRequest(field, f"{value!r} is out of range once in UTC") from None


def parse_end(value: str, field: str) -> datetime:
    """`value` as the end of a span, excluded: a date names its whole day, which ends at
    the next midnight (UTC); a date and time is that moment (`parse_moment`)."""
    moment = parse_moment(value, field)
    if not _is_date(value.strip()):
        return moment
    try:
        return moment + timedelta(days=1)
    except OverflowError:
        raise BadRequest(field, f"{value!r} is the last day a date can name") from None


def _is_date(text: str) -> bool:
    """Whether `text` is typed as a date alone (``YYYY-MM-DD``)."""
    return len(text) == 10


@overload
def utc_text(moment: datetime, timespec: str = ...) -> str: ...
@overload
def utc_text(moment: None, timespec: str = ...) -> None: ...
def utc_text(moment: datetime | None, timespec: str = "auto") -> str | None:
    """`moment` in ISO 8601, UTC, with a ``Z`` (None stays None). A naive datetime is
    taken as UTC: SQLite hands back the store's UTC datetimes without their offset."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")
