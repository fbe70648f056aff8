"""`verifier export sessions` and ``GET /v1/export/sessions``: every matching session, one
row each, for BI tools. The row shape lives here, for both faces; `exported` is the
command line's, from the configured store.

Rows are read a page at a time through `Store.export_lines` (the position
between pages keeps the order stable while sessions are added; one query a page,
only the columns a row needs, never the runs' results, handed over as plain
tuples with their times as text) and written as they come: no export ever holds
every row, nor makes an object of one. Both verdicts are exported: the computed
`delivery_status`, a person's `override_status`, and `effective_status`.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from verifier.app import Notice
from verifier.config import Config
from verifier.errors import BadRequest
from verifier.store import NoStore, SessionFilter, Store
from verifier.store.db import EXPORT_LINE

FORMATS = ("csv", "jsonl")
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}
COLUMNS = EXPORT_LINE
# A spreadsheet reads a cell starting with one of these as a formula (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_FORMULA_FIRST = frozenset(_FORMULA_START)


def safe_cell(value: Any) -> str:
    """A CSV cell no spreadsheet runs as a formula: such text gets a leading ``'``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


class _Echo:
    """A file for `csv.writer` that keeps nothing: ``writerow`` returns the line."""

    def write(self, line: str) -> str:
        return line


def csv_lines(rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    """The header, then one CSV line per row of values in `COLUMNS` order (RFC 4180, CRLF),
    every cell made safe (`safe_cell`)."""
    writer = csv.writer(_Echo())
    yield writer.writerow(COLUMNS)
    first = _FORMULA_FIRST
    for values in rows:
        # `safe_cell` inline for text, the common case: a call per cell would double the cost.
        yield writer.writerow(
            [
                ("'" + v if v[:1] in first else v) if v.__class__ is str else safe_cell(v)
                for v in values
            ]
        )


_JSON = json.JSONEncoder(ensure_ascii=False).encode


def jsonl_lines(rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    """One JSON object per row of values in `COLUMNS` order, keyed by them, one per line."""
    for values in rows:
        yield _JSON(dict(zip(COLUMNS, values, strict=True))) + "\n"


def lines(store: Store, filters: SessionFilter, fmt: str) -> Iterator[str]:
    """The export of `filters` in `fmt` (csv, jsonl), produced as it is read."""
    if fmt not in FORMATS:
        raise BadRequest("format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
    rows = store.export_lines(filters)
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
