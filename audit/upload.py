"""Handing a report to the verifier: written to a file, or posted to the service.

`post_report` sends ``POST /v1/sessions`` with an ingest token, over the
standard library (`audit` stays light), retrying what may pass on a second
try (the service unreachable, 5xx, 408, 429) with exponential backoff.
Posting is idempotent: the service answers 202 for a new session and 200 for
the same bytes already stored, so a retry after a lost answer is harmless;
409 (the id stored with other bytes) and other 4xx are final. `post` is that
retrying POST, which the witness client (`audit.witness`) uses too.
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

__all__ = ["Posted", "post", "post_report", "write_report"]

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
    try:
        status, body, attempt = post(
            base_url.rstrip("/") + "/v1/sessions",
            raw,
            token=token,
            content_type="application/json",
            attempts=attempts,
            backoff_s=backoff_s,
            max_backoff_s=max_backoff_s,
            timeout_s=timeout_s,
            sleep=sleep,
        )
    except _Refused as exc:
        if exc.status == 409:
            problem = f"HTTP 409: the session id is stored with other bytes ({exc.answer})"
            raise UploadError(problem, 409) from None
        raise
    answer = json.loads(body or b"{}")
    return Posted(str(answer.get("session_id", "")), status == 202, status, attempt)


class _Refused(UploadError):
    """An HTTP answer not worth retrying; `answer` is the API's own problem text."""

    def __init__(self, problem: str, status: int, answer: str) -> None:
        super().__init__(problem, status)
        self.answer = answer


def post(
    url: str,
    body: bytes,
    *,
    token: str,
    content_type: str,
    attempts: int,
    backoff_s: float,
    max_backoff_s: float = 30.0,
    timeout_s: float,
    sleep: Callable[[float], None] = _sleep,
) -> tuple[int, bytes, int]:
    """POST `body` to `url` with a bearer `token`, retrying what may pass on a second try
    (unreachable, 5xx, 408, 429) after waits that double from `backoff_s` up to
    `max_backoff_s`, or as long as a ``Retry-After`` asks (within the same cap).

    Returns the status, the answer's bytes and the attempts made; raises
    `UploadError` (with the status) on any other HTTP error, or after `attempts`.
    """
    if attempts < 1:
        raise UploadError(f"attempts: got {attempts}, expected at least 1")
    problem, status = "", None
    for attempt in range(1, attempts + 1):
        request = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={"Authorization": f"Bearer {token}", "Content-Type": content_type},
        )
        wait = min(max_backoff_s, backoff_s * 2 ** (attempt - 1))
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as answer:
                return answer.status, answer.read(), attempt
        except urllib.error.HTTPError as exc:
            status, said = exc.code, _problem(exc)
            problem = f"HTTP {exc.code}: {said}"
            if exc.code not in _RETRIED:
                raise _Refused(problem, exc.code, said) from None
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
