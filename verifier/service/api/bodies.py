"""The request and response bodies: the OpenAPI document is generated from these.

Classes whose plain names are taken elsewhere in the project (the store's `Counts`,
`Agent`, `Repo`, `Group`, `Override`) end in ``Body``; `_published` keeps the
component names the document has always published, so generated clients do not change.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Path, Query
from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field

from verifier.errors import BadRequest
from verifier.moments import parse_moment

DeliveryStatus = Literal["pending", "delivered", "not_delivered", "inconclusive"]
RunVerdict = Literal["delivered", "not_delivered", "inconclusive"]
GroupBy = Literal["day", "week", "agent", "model", "repo"]
MAX_PAGE = 500
# A search is a session id, a branch or a commit: longer is not one.
MAX_SEARCH = 200
# Row ids are 32-bit integers on PostgreSQL: a larger one is a bad request, not a query.
MAX_ID = 2**31 - 1
# Text no database column can hold (PostgreSQL refuses NUL) is refused as a bad request.
NO_NUL = r"^[^\x00]*$"
SessionId = Annotated[str, Path(max_length=128, pattern=NO_NUL)]
Filter = Annotated[str | None, Query(pattern=NO_NUL)]
RowId = Annotated[int, Path(ge=1, le=MAX_ID)]


def _moment(value: Any) -> Any:
    """A query's moment read as every face reads one (`verifier.moments.parse_moment`:
    a date is its midnight UTC, a time needs its offset); anything else is left to
    pydantic's own refusal."""
    if not isinstance(value, str):
        return value
    try:
        return parse_moment(value, "")
    except BadRequest as exc:
        raise ValueError(exc.problem) from None


# The document says date-time; a plain date (midnight UTC) is also taken, as on the
# command line.
Moment = Annotated[AwareDatetime, BeforeValidator(_moment)]


# -- response shapes (the OpenAPI document is generated from these) -------------------


class _Open(BaseModel):
    # Later issues add keys beside the pinned ones; clients must ignore what they do not know.
    model_config = ConfigDict(extra="allow")


def _published(name: str) -> ConfigDict:
    """The configuration of a body published as `name`: its title in the document.

    FastAPI keys a component by the class's ``__qualname__`` and titles it by its
    ``__name__``; a renamed body sets ``__qualname__`` and this title (and a subclass
    its own, since the title is inherited).
    """
    return ConfigDict(extra="allow", title=name)


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable: bad_request, invalid_report, unauthorized, ...")
    field: str | None = Field(description="The field, parameter or header at fault, if one is.")
    problem: str = Field(description="What is wrong, in words.")


class ErrorBody(_Open):
    error: ErrorDetail


class Accepted(_Open):
    session_id: str
    status: Literal["pending"]
    url: str


class AgentBody(_Open):
    __qualname__ = "Agent"
    model_config = _published("Agent")

    name: str
    version: str | None
    model: str | None
    tool_profile: str | None


class RepoBody(_Open):
    __qualname__ = "Repo"
    model_config = _published("Repo")

    name: str
    base_commit: str
    head_commit: str | None
    branch: str | None


class RunSummary(_Open):
    id: int
    delivery_status: RunVerdict
    verified_at: datetime
    started_at: datetime
    duration_s: float
    verifier_version: str
    reason: str | None
    checks: dict[str, str] = Field(description="Each check's status: pass, fail, error, skipped.")


class SessionSummary(_Open):
    session_id: str
    url: str
    task_id: str | None = Field(
        default=None,
        description="The task the report names (GET /v1/tasks/{task_id} shows what it must "
        "achieve); null when it names none.",
    )
    agent_status: str = Field(description="The agent's own status, canonical (done, ...).")
    raw_agent_status: str = Field(description="The status as the report wrote it.")
    done: bool
    delivery_status: DeliveryStatus = Field(
        description="The latest conclusive verdict; inconclusive when no run concluded; "
        "pending before the first run."
    )
    override_status: Literal["delivered", "not_delivered"] | None = Field(
        default=None,
        description="A person's standing override (POST .../override), beside the computed "
        "`delivery_status`, never in its place; null when none stands.",
    )
    effective_status: DeliveryStatus = Field(
        default="pending",
        description="`override_status` when one stands, else `delivery_status`: what a "
        "merge gate decides on. The stats count `delivery_status`.",
    )
    verified_at: datetime | None = Field(description="When the latest run finished.")
    trail_note: str | None = Field(
        default=None,
        description="Set when the report had no audit trail and its repository accepts "
        'that (`trail = "optional"`): what the verdict then rests on. Null for a recorded '
        "trail, or when the missing trail left the verdict inconclusive (`audit.no_trail`).",
    )
    verdict_run_id: int | None
    latest_run_id: int | None
    agent: AgentBody
    repo: RepoBody
    started_at: datetime
    ended_at: datetime
    ingested_at: datetime
    report_sha256: str


class OverrideBody(_Open):
    __qualname__ = "Override"
    model_config = _published("Override")

    id: int
    at: datetime
    author: str = Field(description='"token:<name>" or "cli:<user>".')
    status: Literal["delivered", "not_delivered", "cleared"]
    reason: str


class OverrideRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["delivered", "not_delivered", "cleared"] = Field(
        description="cleared withdraws the standing override."
    )
    reason: Annotated[str, Field(min_length=1, max_length=4000, pattern=NO_NUL)]


class SessionDetail(SessionSummary):
    checks: dict[str, Any] = Field(
        description="The verdict run's checks (status, findings, details, notes); "
        "the latest run's when none concluded; empty while pending."
    )
    runs: list[RunSummary] = Field(description="Every verification run, oldest first.")
    overrides: list[OverrideBody] = Field(
        default_factory=list, description="Every override, oldest first; the last one stands."
    )


class SessionPage(_Open):
    sessions: list[SessionSummary]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page.")


class CountsBody(_Open):
    __qualname__ = "Counts"
    model_config = _published("Counts")

    total: int
    done: int
    delivered: int
    not_delivered: int
    inconclusive: int
    pending: int
    silent_failures: int = Field(description="Done, but not delivered.")
    done_rate: float | None = Field(description="Done among conclusive sessions.")
    delivered_rate: float | None = Field(description="Delivered among conclusive sessions.")


class GroupBody(CountsBody):
    __qualname__ = "Group"
    model_config = _published("Group")

    key: str


class StatsBody(CountsBody):
    model_config = _published("StatsBody")

    groups: list[GroupBody]
    verdicts: Literal["computed"] = Field(
        default="computed", description="The counts are of computed verdicts, never overrides."
    )
    overridden: int = Field(
        default=0,
        description="Of the sessions counted, those carrying a person's override (counted "
        "by their computed verdict).",
    )


class RejectedSummary(_Open):
    id: int
    url: str
    received_at: datetime
    source: str
    field: str
    problem: str
    report_sha256: str = Field(description="SHA-256 of the whole body as it was received.")
    report_size: int = Field(description="Bytes received; more than kept when over the limit.")


class RejectedPage(_Open):
    rejected: list[RejectedSummary]
    next_before: int | None = Field(description="Pass as `before` for the next page.")


class Reverify(_Open):
    session_id: str
    status: Literal["queued"]
    url: str


class ReceiptBody(_Open):
    session_id: str
    count: int = Field(description="Entries witnessed, from index 0.")
    head_hash: str = Field(description="The hash of the last entry witnessed.")
    time: str = Field(description="When the service held them (RFC 3339 UTC).")


class ReceiptSignature(_Open):
    alg: Literal["ed25519"]
    key_id: str = Field(description="Hex SHA-256 of the service's raw public key.")
    value: str = Field(description="Base64 Ed25519 signature over the receipt's JCS form.")


class SignedReceipt(_Open):
    receipt: ReceiptBody
    signature: ReceiptSignature


class Health(_Open):
    status: Literal["ok"]
    version: str


class Ready(_Open):
    status: Literal["ready"]
    checks: dict[str, str]


class NotReady(ErrorBody):
    checks: dict[str, str]


# -- tasks (docs/tasks.md) -----------------------------------------------------------

TaskId = Annotated[str, Path(max_length=128, pattern=NO_NUL)]
TestIds = Annotated[list[Annotated[str, Field(pattern=NO_NUL)]], Field(max_length=10_000)]


class TaskRequest(BaseModel):
    """A task to declare; the same rules hold it as in the tasks file (docs/tasks.md)."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(
        description="1 to 128 characters of A-Z a-z 0-9 . _ : -, as a report's task_id names it."
    )
    repository: str | None = Field(
        default=None, description="The repository (repo.name) it is for; null: any."
    )
    fail_to_pass: TestIds = Field(
        default_factory=list,
        description="Acceptance tests, in the runner's notation: each must fail at the base "
        "and pass at the head.",
    )
    pass_to_pass: TestIds = Field(default_factory=list, description="Tests that must keep passing.")
    read_only: bool = Field(default=False, description="The task asks for no change.")
    replace: bool = Field(
        default=False, description="Replace a task stored under this id with other tests."
    )


class TaskBody(_Open):
    __qualname__ = "Task"
    model_config = _published("Task")

    task_id: str
    repository: str | None
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    read_only: bool
    source: Literal["file", "store"] = Field(
        description="file: the tasks file, which wins; store: declared through this API "
        "or `verifier task add`."
    )
    path: str | None = Field(description="The tasks file it was read from.")
    added_at: str | None = Field(description="When it was stored (UTC).")
    added_by: str | None = Field(description="Who stored it (the token's name).")


class TaskPage(_Open):
    tasks: list[TaskBody]
