"""Handing a report to the verifier: written to a file, or posted to the service.

`post_report` sends ``POST /v1/sessions`` with an ingest token, over the
standard library (`audit` stays light), retrying what may pass on a second
try (the service unreachable, 5xx, 408, 429) with exponential backoff.
Posting is idempotent: the service answers 202 for a new session and 200 for
the same bytes already stored, so a retry after a lost answer is harmless;
409 (the id stored with other bytes) and other 4xx are final.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from time import sleep as _sleep

from audit.errors import UploadError

__all__ = ["Posted", "post_report", "write_report"]

_RETRIED = frozenset((408, 429, 500, 502, 503, 504))


@dataclass(frozen=True, slots=True)
class Posted:
    """The service's answer: `created` False when these bytes were already stored."""

    session_id: str
    created: bool
    status: int
    attempts: int


def write_report(raw: bytes, path: Path) -> None:
    """Write the report's bytes to `path` atomically (a temporary file, fsynced, renamed)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("wb") as fh:
        fh.write(raw)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)


def post_report(
    raw: bytes,
    base_url: str,
    token: str,
    *,
    attempts: int = 5,
    backoff_s: float = 0.5,
    max_backoff_s: float = 30.0,
    timeout_s: float = 30.0,
    sleep: Callable[[float], None] = _sleep,
) -> Posted:
    """Post the report's bytes to ``{base_url}/v1/sessions``; raises `UploadError` when refused
    or when every attempt failed, with the last problem."""
    if attempts < 1:
        raise UploadError(f"attempts: got {attempts}, expected at least 1")
    url = base_url.rstrip("/") + "/v1/sessions"
    problem, status = "", None
    for attempt in range(1, attempts + 1):
        request = urllib.request.Request(
            url,
            data=raw,
            method="POST",
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        wait = min(max_backoff_s, backoff_s * 2 ** (attempt - 1))
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as answer:
                body = json.loads(answer.read() or b"{}")
                return Posted(
                    str(body.get("session_id", "")), answer.status == 202, answer.status, attempt
                )
        except urllib.error.HTTPError as exc:
            status = exc.code
            problem = f"HTTP {exc.code}: {_problem(exc)}"
            if exc.code not in _RETRIED:
                if exc.code == 409:
                    problem = (
                        f"HTTP 409: the session id is stored with other bytes ({_problem(exc)})"
                    )
                raise UploadError(problem, status) from None
            retry_after = exc.headers.get("Retry-After", "")
            if retry_after.isdigit():
                wait = min(max_backoff_s, float(retry_after))
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            problem, status = f"cannot reach {url}: {reason}", None
        if attempt < attempts:
            sleep(wait)
    raise UploadError(f"gave up after {attempts} attempt(s): {problem}", status)


def _problem(exc: urllib.error.HTTPError) -> str:
    """The API's ``error.problem``, else the reason phrase."""
    try:
        body = json.loads(exc.read())
        return str(body["error"]["problem"])
    except (ValueError, KeyError, TypeError, OSError):
        return str(exc.reason)
