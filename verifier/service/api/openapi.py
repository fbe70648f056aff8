"""The OpenAPI document: FastAPI's, with the report's own JSON Schema as the submit body,
and the words an API user reads.

Parameters that do not validate answer our 400 in the error shape, so FastAPI's 422
and its validation schemas leave the document; a 422 a route declares itself (a report
naming an unknown task) stays. The document's description, its tags' and each
operation's are written here for the people who call the API, apart from the
docstrings (which are for those who change the code):
`tests/service/api/test_openapi_words.py` refuses notes meant for the team in any of them.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from verifier import resources

REPORT_SCHEMA = resources.report_schema_file()


def document(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, with the report's JSON Schema as the body of ``POST /v1/sessions``."""
    if app.openapi_schema:
        return app.openapi_schema
    document = get_openapi(
        title=app.title,
        version=app.version,
        description=DESCRIPTION,
        routes=app.routes,
        tags=[{"name": name, "description": text} for name, text in TAGS.items()],
    )
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            # Parameters that do not validate are our 400 in the error shape, not FastAPI's 422.
            responses = operation.get("responses", {})
            if _is_fastapis(responses.get("422")):
                responses.pop("422")
                responses.setdefault("400", _ERROR_RESPONSE)
            # A route not in the table keeps its docstring; the words test names it.
            key = f"{method.upper()} {path}"
            operation["description"] = OPERATIONS.get(key, operation.get("description", ""))
            for parameter in operation.get("parameters", []):
                if not parameter.get("description") and parameter["name"] in PARAMETERS:
                    parameter["description"] = PARAMETERS[parameter["name"]]
            for status, response in responses.items():
                if response.get("description") in FASTAPI_WORDS:
                    response["description"] = STATUSES.get(status, response["description"])
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    report = json.loads(REPORT_SCHEMA.read_text(encoding="utf-8"))
    definitions = report.pop("$defs", {})
    for key in ("$schema", "$id"):
        report.pop(key, None)
    schemas["SessionReport"] = _rebase(report)
    for name, schema in definitions.items():
        schemas[f"SessionReport{name}"] = _rebase(schema)
    app.openapi_schema = document
    return document


def _is_fastapis(response: Any) -> bool:
    """FastAPI's own 422 (its validation error body), not one a route declares (a report
    naming an unknown task answers 422 in our error shape)."""
    if not isinstance(response, dict):
        return False
    schema = response.get("content", {}).get("application/json", {}).get("schema", {})
    return bool(schema.get("$ref") == "#/components/schemas/HTTPValidationError")


DESCRIPTION = """\
Proves whether a coding agent's session really delivered its work. A harness posts
each session's report (`POST /v1/sessions`); the service verifies it in the
background (the claimed changes are in the repository, the repository's own tests
pass, the audit trail is whole, the model's edits replay to the same result) and
keeps the verdict beside the agent's own status. Read it back per session, as a
list, as counts over time, or as an export.

**Tokens.** Every call but `/healthz` and `/readyz` takes `Authorization: Bearer
<token>`, a token made with `verifier token create --scope ingest|read|export|admin`.
`ingest` posts reports and trails, `read` reads sessions, stats and metrics,
`export` reads the exports, `admin` may do all of these and re-verify, override
and read rejected bodies. No token is a 401; a token of another scope a 403.

**Errors.** Every 4xx and 5xx answers `{"error": {"code", "field", "problem"}}`:
`code` is stable for scripts, `field` names the parameter, header or report field
at fault (null when none is), `problem` says what is wrong in words. A database
that cannot be reached is a 503 with `Retry-After`; nothing accepted is lost.

**Verdicts.** `delivery_status` is `pending` before the first run, then
`delivered`, `not_delivered` or `inconclusive` (no run could conclude, such as a
repository that could not be read). A person's override stands beside it in
`override_status`, never in its place.
"""

TAGS = {
    "sessions": "Post a session's report and its audit trail; read sessions and their "
    "verdicts; verify again or override (admin).",
    "tasks": "The tasks an operator declares (their acceptance and must-keep tests), which "
    "a report names by `task_id`.",
    "export": "Every session a filter keeps, one row each, streamed.",
    "stats": "Done against delivered: counts and rates over a range of days.",
    "admin": "Bodies that could not be read as a report, kept for an administrator.",
    "operations": "Metrics, liveness and readiness, for monitoring and probes.",
}

# Each operation's description, by method and path; `test_openapi_words` fails for a
# route without one.
OPERATIONS = {
    "POST /v1/sessions": "Store a session report (its bytes, as the harness wrote them) and "
    "queue its verification. 202 with the session's URL when new; 200 with the session as "
    "it stands when these exact bytes were stored before; 409 when the session id is "
    "stored with other bytes (the stored report is kept); 400 naming the report field at "
    "fault, the bytes being kept for an administrator; 422 when it names a task nobody "
    "declared for its repository (nothing is stored); 413 over the size limit. An ingest "
    "token bound to an agent posts only that agent's reports.",
    "GET /v1/sessions": "Sessions, the latest ended first, `limit` at a time: pass "
    "`next_cursor` as `cursor` for the next page (pages stay right while sessions are "
    "added). Every filter given must hold. `q` searches part of the session id or branch "
    "(any case) or the start of a commit; `check` and `code` keep the sessions whose "
    "verdict's run has a finding of that check and code.",
    "POST /v1/sessions/{session_id}/trail": "Send audit trail entries to the service as the "
    "recorder writes them (JSON lines), so that a trail cut short afterwards cannot "
    "pass as whole. Each entry must extend the chain already received (409 with the `index` of the "
    "first that does not); entries sent again unchanged change nothing. The answer is a "
    "receipt of the head received, signed with the service's key.",
    "GET /v1/sessions/{session_id}": "One session: the agent's status beside the computed "
    "verdict, the checks of the run the verdict comes from with their findings, every "
    "verification run, and any override.",
    "POST /v1/sessions/{session_id}/verify": "Queue a new verification of a stored session; "
    "the request is written to the admin log first. 410 when the session's report was "
    "pruned; 503 when this server has no job queue.",
    "POST /v1/sessions/{session_id}/override": "Record a person's verdict on a session, with "
    "who, why and when (also in the admin log). The computed verdict, its runs and the "
    "stats stay as they are; `cleared` withdraws the standing override.",
    "POST /v1/tasks": "Declare a task: its repository, the tests it must make pass "
    "(`fail_to_pass`, failing at the base) and keep passing (`pass_to_pass`), and whether "
    "it may change no file (`read_only`). 201 when added, or replaced with `replace`; 200 "
    "when stored as given already; 409 when its id is stored with other tests; 400 for a "
    "task the server's tasks file declares (the file's wins). Written to the admin log.",
    "GET /v1/tasks": "Every task in force: those of the server's tasks file, then those "
    "declared through the API, each with where it was declared (`source`).",
    "GET /v1/tasks/{task_id}": "One task's tests, its repository, and where it was declared.",
    "GET /v1/export/sessions": "Every session the filters keep, the latest ended first, one "
    "row each, as CSV or JSON lines, streamed however many there are. CSV cells a "
    "spreadsheet would run as formulas start with a quote.",
    "GET /v1/stats": "How many sessions ended from `from` to `to` (each a date or an ISO 8601 "
    "date and time with its offset; a date `to` is that whole UTC day, a time `to` the moment "
    "they ended before), by state, with the done rate and the delivered rate, in all and "
    "by day, week, agent, model or repository. Both rates are over the conclusive sessions "
    "(delivered or not delivered), sums divided once; `silent_failures` are done but not "
    "delivered.",
    "GET /v1/rejected": "Bodies that could not be read as a report, the latest first, with "
    "the field at fault and why: pass `next_before` as `before` for the next page.",
    "GET /v1/rejected/{rejected_id}": "The bytes of a rejected body as they were kept: the "
    "whole body, or the start of one that was over the size limit.",
    "GET /metrics": "Prometheus metrics in the text format: sessions and runs, check "
    "durations, sessions waiting. Labels take a bounded set of values.",
    "GET /healthz": "The process is up and answers, with its version; no token needed.",
    "GET /readyz": "Ready to serve: the database answers, its schema is current, and the "
    "job queue answers. 503 with each failing check otherwise; no token needed.",
}

STATUSES = {
    "200": "The answer.",
    "201": "Created.",
    "202": "Accepted: queued.",
    "400": "A parameter or field is not valid: `error.field` names it.",
    "401": "No token, or a token that is unknown, revoked or expired.",
    "403": "The token's scope does not allow this call.",
    "404": "No such session or row.",
    "409": "Conflicts with what is stored (see the operation).",
    "410": "Gone: the session's report was pruned.",
    "413": "The body is over the size limit.",
    "500": "A fault of the server; reported in the error shape.",
    "503": "The database or the job queue cannot be reached; retry after `Retry-After`.",
}
# Query parameters declared without a description get these (the filters are shared by
# the listing and the export).
PARAMETERS = {
    "agent": "The agent's name, as its reports give it.",
    "model": "The model, as the reports give it; empty for sessions without one.",
    "repo": "The repository's name, as the server's configuration names it.",
    "agent_status": "The agent's own status, canonical: done, turns_exhausted, "
    "budget_exhausted, loop_detected, timeout, error or cancelled.",
    "done": "true: the sessions whose agent said done; false: the others.",
    "delivery_status": "The computed verdict: pending, delivered, not_delivered or inconclusive.",
    "branch": "The branch the report names.",
    "limit": "How many to answer at most.",
    "format": "csv (one header line, then a row per session) or jsonl (a JSON object a line).",
    "group_by": "Also count by day, week (from Monday), agent, model or repo.",
}
FASTAPI_WORDS = {
    "Successful Response",
    "Bad Request",
    "Unauthorized",
    "Forbidden",
    "Not Found",
    "Conflict",
    "Gone",
    "Request Entity Too Large",
    "Content Too Large",
    "Internal Server Error",
    "Service Unavailable",
}

_ERROR_RESPONSE = {
    "description": "Bad request: the field or parameter named is not valid.",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
}


def _rebase(node: Any) -> Any:
    """The report schema's ``#/$defs/X`` references, pointed at the OpenAPI components."""
    if isinstance(node, dict):
        return {
            k: (
                "#/components/schemas/SessionReport" + v.removeprefix("#/$defs/")
                if k == "$ref" and isinstance(v, str) and v.startswith("#/$defs/")
                else _rebase(v)
            )
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_rebase(v) for v in node]
    return node
