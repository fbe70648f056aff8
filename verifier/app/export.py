"""`verifier export sessions` and ``GET /v1/export/sessions``: every matching session, one
row each, for BI tools. The row shape lives here, for both faces; `exported` is the
command line's, from the configured store.

Rows are read a page at a time through `Store.session_lines` (the position
between pages keeps the order stable while sessions are added; only the
columns a row needs, never the runs' results) and written as they come: no
export ever holds every row. Both verdicts are exported: the computed
`delivery_status`, a person's `override_status`, and `effective_status`.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from verifier.app import Notice
from verifier.config import Config
from verifier.errors import BadRequest
from verifier.moments import utc_text
from verifier.store import NoStore, SessionFilter, Store

if TYPE_CHECKING:
    from verifier.store.rows import SessionLine

FORMATS = ("csv", "jsonl")
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}
COLUMNS = (
    "session_id",
    "agent",
    "agent_version",
    "model",
    "repo",
    "base_commit",
    "head_commit",
    "branch",
    "agent_status",
    "done",
    "started_at",
    "ended_at",
    "delivery_status",
    "override_status",
    "effective_status",
    "verdict_run_id",
    "verified_at",
    "first_finding_code",
    "report_sha256",
)
# A spreadsheet reads a cell starting with one of these as a formula (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def row(line: SessionLine) -> dict[str, Any]:
    """One session's export row, keyed by `COLUMNS`."""
    s = line.session
    return {
        "session_id": s.session_id,
        "agent": s.agent_name,
        "agent_version": s.agent_version,
        "model": s.agent_model,
        "repo": s.repo_name,
        "base_commit": s.base_commit,
        "head_commit": s.head_commit,
        "branch": s.branch,
        "agent_status": s.status,
        "done": s.done,
        "started_at": utc_text(s.started_at),
        "ended_at": utc_text(s.ended_at),
        "delivery_status": line.delivery_status,
        "override_status": s.override_status,
        "effective_status": line.effective_status,
        "verdict_run_id": line.verdict_run_id,
        "verified_at": utc_text(line.verified_at),
        "first_finding_code": line.first_finding_code,
        "report_sha256": s.report_sha256,
    }


def safe_cell(value: Any) -> str:
    """A CSV cell no spreadsheet runs as a formula: such text gets a leading ``'``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def csv_lines(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """The header, then one CSV line per row (RFC 4180, CRLF)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def take() -> str:
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    writer.writerow(COLUMNS)
    yield take()
    for item in rows:
        writer.writerow([safe_cell(item[c]) for c in COLUMNS])
        yield take()


def jsonl_lines(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """One JSON object per line, keys in `COLUMNS` order."""
    for item in rows:
        yield json.dumps(item, ensure_ascii=False) + "\n"


def lines(store: Store, filters: SessionFilter, fmt: str) -> Iterator[str]:
    """The export of `filters` in `fmt` (csv, jsonl), produced as it is read."""
    if fmt not in FORMATS:
        raise BadRequest("format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
    rows = (row(line) for line in store.session_lines(filters))
    return csv_lines(rows) if fmt == "csv" else jsonl_lines(rows)


@contextmanager
def exported(
    config: Config, filters: SessionFilter, fmt: str, *, notice: Notice | None = None
) -> Iterator[Iterator[str]]:
    """The export of the configured store's sessions, its lines produced as they are read
    while the store is open (it closes when the block ends). Nothing stored yet: the CSV
    header alone, or no line of JSON (`notice` says why)."""
    try:
        store = Store.open(config.database_url, read_only=True)
    except NoStore as exc:
        if notice is not None:
            notice(str(exc))
        yield csv_lines([]) if fmt == "csv" else iter(())
        return
    try:
        yield lines(store, filters, fmt)
    finally:
        store.close()
