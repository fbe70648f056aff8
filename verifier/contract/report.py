"""Session report v1: the input contract (`docs/contract/session-report-v1.md`).

`parse_report(raw)` turns bytes into a `Report`, or raises `InvalidReport`
naming the field and the problem. The raw bytes stay beside the parsed form.
Only what makes the document unreadable as the contract is an error here; a
broken promise inside a readable report (a path outside the root, a hole in the
audit trail) is a finding of one of the checks.

Each model's docstring, and the one under each field, is the description the
JSON Schema generated from these models gives it (`json_schema`): the schema is
the harness author's manual. ``python -m verifier.contract`` prints it, and
``make schema`` commits it as ``docs/contract/session-report-v1.schema.json``
and its packaged copy ``verifier/contract/report.schema.json``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    StrictInt,
    StringConstraints,
    ValidationError,
    model_validator,
)

from verifier.contract._gc import gc_paused
from verifier.controls import codepoint, first_control
from verifier.errors import InvalidReport
from verifier.tasks import TASK_ID_PATTERN

if TYPE_CHECKING:  # the SDK costs half a second to import: only the trajectory needs it
    from verifier.contract.trajectory import Trajectory

SCHEMA_VERSION = "1"
# The contract's own ceiling; the CLI and the pipeline refuse earlier, at
# ``[verifier] max_report_bytes`` (20 MB by default), while streaming.
MAX_REPORT_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """How many items a report may hold, checked before anything is validated.

    Why: the reading costs memory per item, not per byte. Before these caps a
    24 MB report of ``{}`` changes took 7.5 GB: pydantic built one error per
    empty entry, 2.6 million of them. The container rule bounds what
    ``json.loads`` builds (an empty object costs 64 bytes of Python for 3
    bytes of JSON): beyond the first `containers_free`, a report holds at most
    one JSON object or array per `bytes_per_container` bytes, counted outside
    strings. Honest reports hold one per 20 bytes or fewer (a short function
    call is 5 containers in 90 bytes). Together they keep `parse_document` under
    20 times the report's size.
    """

    changes: int = 100_000
    contents: int = 100_000
    parts: int = 400_000  # all the parts of all the contents: each is an SDK object
    audit_entries: int = 100_000
    containers_free: int = 10_000
    bytes_per_container: int = 8


LIMITS = Limits()

CANONICAL_STATUSES = (
    "done",
    "turns_exhausted",
    "budget_exhausted",
    "loop_detected",
    "timeout",
    "error",
    "cancelled",
)
STATUS_ALIASES = {
    "terminé": "done",
    "tours épuisés": "turns_exhausted",
    "budget épuisé": "budget_exhausted",
    "boucle détectée": "loop_detected",
    "délai dépassé": "timeout",
}

# What a claimed path may not hold (`verifier.controls.CONTROL`), as the schema says it:
# C0, DEL, C1, and the Unicode line and paragraph separators.
CLAIMED_PATH_PATTERN = r"^[^\u0000-\u001f\u007f-\u009f\u2028\u2029]*$"

Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-fA-F]{4,64}$")]
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
SessionId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]
TaskId = Annotated[str, StringConstraints(pattern=TASK_ID_PATTERN)]
# The modes git records for a file: regular, executable, symbolic link.
GitMode = Literal["100644", "100755", "120000"]


def _rfc3339_utc(value: Any) -> Any:
    """A JSON string ending in Z or +00:00; numbers and other offsets are refused."""
    if not isinstance(value, str):
        raise ValueError("expected an RFC 3339 UTC date-time string")
    if not value.endswith(("Z", "z", "+00:00")):
        raise ValueError("expected a UTC date-time (ending in Z or +00:00)")
    return value


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


Timestamp = Annotated[AwareDatetime, BeforeValidator(_rfc3339_utc), AfterValidator(_utc)]


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("contains U+0000 (NUL), which no store can hold as text")
    return value


# A string the store keeps in a text column: anything JSON allows but NUL.
Text = Annotated[str, AfterValidator(_no_nul)]


def _objects(value: Any) -> list[dict[str, Any]]:
    """A list of JSON objects, kept as they are (a copy would double what they cost)."""
    if not isinstance(value, list):
        raise ValueError(f"expected an array, got {type(value).__name__}")
    for n, item in enumerate(value):
        if not isinstance(item, dict):
            raise ValueError(f"item {n}: expected an object, got {type(item).__name__}")
    return value


# The checks read these objects raw; the schema still says "an array of objects".
Objects = Annotated[
    list[dict[str, Any]],
    PlainValidator(_objects, json_schema_input_type=list[dict[str, Any]]),
]


# The models' docstrings, and the docstring under each field (`use_attribute_docstrings`),
# are the published schema's descriptions: its readers are harness authors, so they say
# what a field means and what the verifier does with it, in Markdown, and leave how the
# code works to comments.
class _Model(BaseModel):
    """Frozen; fields we do not know are kept, not refused."""

    model_config = ConfigDict(frozen=True, extra="allow", use_attribute_docstrings=True)


class Agent(_Model):
    """The agent that ran the session."""

    name: Text
    """The agent's name, the same in all its reports. Sessions are indexed and counted by
    it, and it names the agent's entry in the verifier's configuration (`[agents.NAME]`):
    the keys its reports must be signed with, whether its trail must be witnessed. Must
    not contain U+0000 (NUL)."""

    version: Text | None = None
    """The agent's version, as the harness writes it. Indexed and shown, not interpreted.
    Must not contain NUL."""

    model: Text | None = None
    """The model the agent ran on (e.g. `gemini-3.5-flash`). Indexed, counted and shown,
    not interpreted. Must not contain NUL."""

    tool_profile: Text | None = None
    """The tool vocabulary the harness declared to the model: the name of a tool profile
    in the verifier's configuration (letters, digits, `-`, `_` and `.`, a dot neither first nor
    doubled); absent or null means
    `default`. The audit and replay checks read the model's function calls through it;
    with a profile the verifier does not have, every call is unknown, and an unknown call
    answered as successful leaves the session inconclusive. Must not contain NUL."""


class Repo(_Model):
    """The repository the session worked in, and the two commits that bound its work."""

    name: Text
    """The repository as the verifier's configuration names it (`[repositories.NAME]`):
    the path or url checked, the test command and the policy are the configured ones for
    this name; a report never chooses what it is checked against. Sessions are indexed by
    it. Must not contain NUL."""

    path: str | None = None
    """Where the harness had the repository. Recorded only: the verifier checks the
    configured repository, never this path."""

    url: str | None = None
    """The repository's remote as the harness knew it. Recorded only: the verifier fetches
    from the url in its own configuration, never from this one."""

    base_commit: Hex
    """The commit the session started from, in hex: a full commit id (40 or 64 digits)
    or a prefix of at least 4 that names exactly one commit (a repository the verifier
    fetches by url can find a commit no branch holds only by its full id). Each claim's
    `sha256_before` and `mode_before` are checked at this commit, and by default the
    repository's test files are taken from it, so a session cannot rewrite the tests it
    is judged by."""

    head_commit: Hex | None = None
    """The commit that holds the work, in hex as `base_commit`. Absent or null: the work
    is in the repository's working tree, uncommitted. Each claim's `sha256_after` and
    `mode_after` are checked there, and nothing outside the claims may differ between the
    base and the head."""

    branch: Text | None = None
    """The branch the work is on. Indexed and shown, not checked. Must not contain NUL."""


class Usage(_Model):
    """What the session consumed, summed over the model's replies (the SDK's
    `usage_metadata`). Recorded, not checked; each count is a JSON integer."""

    turns: StrictInt | None = None
    """The model's replies in the session."""

    tool_calls: StrictInt | None = None
    """The function calls the model made (the trail's `tool_call` entries)."""

    prompt_tokens: StrictInt | None = None
    """Input tokens, summed over the replies (`prompt_token_count`)."""

    output_tokens: StrictInt | None = None
    """Output tokens, thought tokens included, as they are billed as output
    (`candidates_token_count` plus `thoughts_token_count`)."""

    thoughts_tokens: StrictInt | None = None
    """Thought tokens alone (`thoughts_token_count`), already counted in
    `output_tokens`."""

    cached_tokens: StrictInt | None = None
    """Input tokens served from the context cache (`cached_content_token_count`)."""


# `mode_before` / `mode_after` are optional (None: not claimed) so that a change of mode
# alone can be claimed, and reports written before they existed read as they did. The
# path is checked by the changes check, not here, but for its control characters:
# `_check_paths` refuses those before the models are validated, naming the claim.
class ClaimedChange(_Model):
    """A file the agent claims to have changed, with its blob's hash on each side.

    An `action` its hashes or modes contradict (a `create` with a `sha256_before` or a
    `mode_before`, a `delete` with a `sha256_after` or a `mode_after`, a `modify`
    without both hashes) is the changes check's finding `change.action_inconsistent`.
    """

    path: str = Field(json_schema_extra={"pattern": CLAIMED_PATH_PATTERN})
    """The file's path from the repository's root, with `/` separators, compared byte
    for byte as UTF-8 (no Unicode normalisation, no case folding). A path holding a
    control character (C0 from U+0000 to U+001F, NUL, tab and newline included; DEL;
    C1 from U+0080 to U+009F; U+2028 or U+2029) makes the report invalid, the error
    naming the claim, the character and its offset (git allows such names; a session
    cannot claim a change to one, as every terminal, page or log showing the path would
    have to defuse it). A path that is
    absolute or holds a `..` segment, a backslash or an empty segment is a broken
    promise, not an invalid report: the report is stored and the session is not
    delivered."""

    action: Literal["create", "modify", "delete"]
    """`create` (the file does not exist at the base: `sha256_before` is null), `modify`,
    or `delete` (it does not exist at the head: `sha256_after` is null)."""

    sha256_before: Sha256 | None
    """Lowercase hex SHA-256 of the file's blob at `repo.base_commit`, or null when the
    file does not exist there; required, null included. The blob is the bytes git
    stores: the file's raw bytes, or, where a `text` or `eol` attribute applies to the
    path, the bytes after git's CRLF-to-LF conversion, as `git add` stores them (no
    `filter` is run, `core.autocrlf` is not read)."""

    sha256_after: Sha256 | None
    """Lowercase hex SHA-256 of the file's blob at `repo.head_commit` (in the working
    tree when it is null), as `sha256_before`; null when the file does not exist
    there."""

    mode_before: GitMode | None = None
    """The file's git mode at the base: `100644` (regular), `100755` (executable) or
    `120000` (symbolic link). Absent or null: not claimed, and not checked. A `create`
    has none."""

    mode_after: GitMode | None = None
    """The file's git mode at the head, as `mode_before`. A `delete` has none. A
    `modify` with equal hashes and different modes is a change of mode alone
    (`chmod +x run.sh`)."""


class AgentTests(_Model):
    """What the agent says it ran: recorded, never trusted. The tests check runs the
    command from the verifier's configuration for the repository, never this one."""

    command: str | list[str] | None = None
    """The test command the agent ran, as a shell string or an argument list."""

    exit_code: StrictInt | None = None
    """The exit code the agent saw."""

    summary: str | None = None
    """The runner's summary as the agent saw it (e.g. `6 passed`)."""


# `contents` is emptied once `Report.trajectory` has loaded it (or failed to): the
# SDK's objects replace the raw turns, and keeping both made a dense report cost
# 37 times its size. The raw bytes still hold them as written.
class TrajectoryDoc(_Model):
    """The session history as google-genai `types.Content` objects, in order."""

    format: Literal["gemini-contents"]
    """`gemini-contents`: the history is `contents`."""

    contents: Objects
    """Every turn in order, each a google-genai `types.Content` dumped with
    `model_dump(mode="json", exclude_none=True)` (snake_case keys) or in the REST form
    (camelCase keys); roles `user`, `model` and `tool`. A model turn's `function_call`
    parts are answered by one `function_response` each in the next turn. A call with no
    `id` has the positional call id `t<i>.p<j>` (`i` the index of its content, `j` of
    its part, from 0), and its response is the one of the same name at the same rank.
    `thought_signature` is base64 of any variant. Keys the installed SDK does not know
    are dropped and noted, never an error. At most 100,000 contents and 400,000 parts in
    all."""


# Like `contents`, `steps` is emptied once the trajectory has loaded it.
class InteractionDoc(_Model):
    """An Interactions API `Interaction` as the SDK returns it; only `steps` is read.

    The other fields (`id`, `status`, `model`, `usage`...) are kept as given.
    """

    id: Text | None = None
    """The interaction's id, as the API gave it. Kept, not read."""

    status: Text | None = None
    """The interaction's status, as the API gave it (e.g. `completed`). Kept, not read:
    the session's status is the report's `status`."""

    model: Text | None = None
    """The model, as the API gave it. Kept, not read: the report's `agent.model` is the
    one indexed."""

    steps: Objects
    """Every step in order, each validated with the SDK's own step types:
    `function_call` (`id`, required, is the call id; `name`, `arguments`),
    `function_result` (`call_id`, required, the call it answers; `result`, optional
    `name` and `is_error`), `thought` (`signature`, base64 of any variant; `summary`),
    `model_output` and `user_input` (the `text` items of `content`). Consecutive
    `thought`, `function_call` and `model_output` steps make one model turn, consecutive
    `user_input` and `function_result` steps one user turn. The response a trail entry
    hashes is `result` when it is a JSON object, else `{"result": <result>}`. Other
    step types are kept raw and ignored by the checks. At most 400,000 steps."""


class InteractionTrajectoryDoc(_Model):
    """The session history as the steps of one Interactions API `Interaction`."""

    format: Literal["gemini-interaction"]
    """`gemini-interaction`: the history is `interaction`."""

    interaction: InteractionDoc
    """The `Interaction` (`google.genai.interactions.Interaction`) dumped with
    `model_dump(mode="json", exclude_none=True)`, or as the REST JSON."""


# The formats a trajectory may take, told apart by `format`.
TRAJECTORY_FORMATS = ("gemini-contents", "gemini-interaction")
AnyTrajectoryDoc = Annotated[
    TrajectoryDoc | InteractionTrajectoryDoc, Field(discriminator="format")
]


# Entries stay raw: the audit check judges them, malformed ones included.
class AuditDoc(_Model):
    """The harness's audit trail, and the `count` and `head` that pin its end."""

    trail: Literal["recorded", "none"] = "recorded"
    """`recorded` (the default): the harness wrote `entries` while the session ran.
    `none`: there is no trail, as in a report made afterwards from what another tool
    kept of the session (a gemini-cli transcript read by `verifier gemini-cli import`);
    then `entries` is empty, `count` is 0 and `head` null, and nothing proves when or in
    what order the calls ran. A report without a trail is never as strong as one with:
    its verdict is inconclusive (`audit.no_trail`) unless the repository's configuration
    accepts sessions without a trail (`trail = "optional"`), and then the verdict says
    that it rests on the report's word for the calls."""

    entries: Objects
    """One hash-chained JSON object per event, in order, written by the harness as it
    happened: `session_start` (seq 0), one `tool_call` per function call the model made
    (executed or denied), `session_end` last. The contract's reference gives each
    entry's fields (`v`, `session_id`, `seq`, `ts`, `kind`, `call_id`, `tool`,
    `args_sha256`, `decision`, `checkpoint`, `result_sha256`, `effects`, `status`,
    `prev`, `hash`) and how it is hashed. A malformed entry is a finding of the audit
    check, not an invalid report. At most 100,000 entries."""

    count: StrictInt
    """How many entries the harness wrote, a JSON integer. A count other than the number
    of entries present (a trail cut short at its end) is the finding
    `audit.count_mismatch`."""

    head: str | None = None
    """The `hash` of the last entry. A trail whose last hash is not this one (null
    included) is the finding `audit.head_mismatch`."""

    @model_validator(mode="after")
    def _no_entries_without_trail(self) -> AuditDoc:
        if self.trail == "none" and (self.entries or self.count != 0 or self.head is not None):
            raise ValueError(
                "a report with trail 'none' has no entries, a count of 0 and a null head"
            )
        return self


class Signature(_Model):
    """The report's signature: who produced it, when the verifier holds the agent's key."""

    alg: Literal["hmac-sha256", "ed25519"]
    """`ed25519` (proves which key signed) or `hmac-sha256` (proves only that someone
    holding the shared secret did)."""

    key_id: str | None = None
    """Which key signed, as the harness names it; recorded in the verdict's signature
    details. The verifier tries every key configured for the agent, whatever this says."""

    value: str
    """The signature, base64, over the JCS form (RFC 8785) of the report without its
    `signature` field."""


class ReportDoc(_Model):
    """A session report: what the agent claims (its `status` and `changes`), the model's
    turns (`trajectory`) and the harness's `audit` trail, which the verifier holds
    against each other and against the repository before it says whether the work was
    delivered. Fields not named here are kept and ignored; `extensions` is reserved for
    them. The document is RFC 8259 JSON in UTF-8: `NaN`, a key given twice or a lone
    surrogate makes it invalid, and so does a size over the verifier's
    `max_report_bytes` (20 MB by default).
    """

    schema_version: Literal["1"]
    """The contract's version, `"1"`. A report without it, or with another, is refused."""

    session_id: SessionId
    """The session's id, unique per harness installation: 1 to 128 characters of
    `A-Z a-z 0-9 . _ : -`. The store keys sessions by it: the same bytes again are the
    same session, other bytes under a stored id are refused. Every trail entry names
    it, and the trail's genesis hash is made from it."""

    agent: Agent
    """Who ran the session: the agent's name, version, model and tool profile."""

    task: str | None = None
    """The instruction the agent was given. Shown with the session, not checked."""

    task_id: TaskId | None = None
    """The id of the task the session worked on, as the verifier's operator declared it
    (in the verifier's tasks file, with `verifier task add`, or through the API): 1 to
    128 characters of `A-Z a-z 0-9 . _ : -`. The operator's task says what the session
    must achieve (the tests that must fail at the base and pass at the head, the tests
    that must keep passing, whether the task changes nothing); this report only names
    it. A report naming a task the verifier does not know is refused (`unknown_task`)
    and nothing is stored. Absent or null: no task, the session is judged as before."""

    task_read_only: StrictBool | None = None
    """The harness's claim that the task asks for no change (a question to answer, a
    review): a session that changes nothing is then not refused for it. Only a claim:
    it counts only where the repository's policy in the verifier's configuration allows
    such claims (`allow_read_only_claims`, off by default), and never over the
    operator's own task, whose word wins."""

    repo: Repo
    """The repository the session worked in, and its base and head commits."""

    started_at: Timestamp
    """When the session started: an RFC 3339 date-time in UTC, ending in `Z` or
    `+00:00`; another offset, or a number, is refused."""

    ended_at: Timestamp
    """When the session ended, as `started_at`. Sessions are listed and counted by it."""

    status: Text
    """The agent's own verdict: `done`, `turns_exhausted`, `budget_exhausted`,
    `loop_detected`, `timeout`, `error` or `cancelled`; a French harness's `terminé`,
    `tours épuisés`, `budget épuisé`, `boucle détectée` and `délai dépassé` are aliases
    of the first five. Only `done` (or `terminé`) counts as done; an unknown status is
    kept as given and counts as not done. Done is what the agent says; delivered is what
    the verifier proves. Must not contain NUL."""

    final_text: str | None = None
    """The model's last text. Recorded, not checked."""

    usage: Usage | None = None
    """What the session consumed. Recorded, not checked."""

    changes: list[ClaimedChange]
    """Every file the agent claims to have changed between the base and the head;
    required, and may be empty. The changes check holds each claim against the
    repository, and a change outside the claims fails it. At most 100,000."""

    tests: AgentTests | None = None
    """What the agent says it ran. Recorded, never trusted: the verifier runs the
    repository's tests itself."""

    trajectory: AnyTrajectoryDoc
    """Every model turn as the google-genai SDK returned it, in one of two formats told
    apart by `format`: `gemini-contents` (a loop's `contents`) or `gemini-interaction`
    (the steps of one Interactions API `Interaction`)."""

    audit: AuditDoc
    """The hash-chained audit trail the harness wrote as it executed the calls."""

    signature: Signature | None = None
    """The report's signature, over its JCS form without this field. Required of an
    agent the verifier has keys for (`[agents.NAME]`): unsigned or badly signed, its
    report is refused at ingest and never takes its session id. For an agent without
    keys it is noted as unverified, and anyone may post first under its session ids."""

    extensions: dict[str, Any] | None = None
    """Free: whatever else the harness keeps with the report. Kept, never read."""


class Report:
    """A parsed report: the document, the raw bytes, and the trajectory loaded with the SDK.

    `parse_document` reads everything but the trajectory, which costs the SDK's
    import; `trajectory` loads it on first use (once, whichever thread asks) and
    raises `InvalidReport` when it cannot be read. `parse_report` does both.
    """

    __slots__ = ("_lock", "_trajectory", "doc", "raw", "sha256")

    def __init__(self, doc: ReportDoc, raw: bytes, sha256: str) -> None:
        self.doc = doc
        self.raw = raw
        self.sha256 = sha256
        self._lock = threading.Lock()
        self._trajectory: Trajectory | InvalidReport | None = None

    def __repr__(self) -> str:
        return f"Report(session_id={self.session_id!r}, sha256={self.sha256!r})"

    @property
    def trajectory(self) -> Trajectory:
        """The model's turns as google-genai types; `InvalidReport` when they are not."""
        with self._lock:
            if self._trajectory is None:
                from verifier.contract.trajectory import load_interaction, load_trajectory

                doc = self.doc.trajectory
                items = (
                    doc.interaction.steps
                    if isinstance(doc, InteractionTrajectoryDoc)
                    else doc.contents
                )
                try:
                    if isinstance(doc, InteractionTrajectoryDoc):
                        self._trajectory = load_interaction(items, release=True)
                    else:
                        self._trajectory = load_trajectory(items, release=True)
                except InvalidReport as exc:
                    self._trajectory = exc
                finally:
                    items.clear()  # loaded once: the SDK objects replace the raw ones
            if isinstance(self._trajectory, InvalidReport):
                raise self._trajectory
            return self._trajectory

    @property
    def session_id(self) -> str:
        return self.doc.session_id

    @property
    def status(self) -> str:
        """The canonical status, or the raw one when it is not a known status."""
        return canonical_status(self.doc.status)

    @property
    def done(self) -> bool:
        return self.status == "done"


def canonical_status(raw: str) -> str:
    """Map the French aliases onto canonical statuses; keep unknown ones as given."""
    return STATUS_ALIASES.get(raw, raw)


@gc_paused()  # millions of objects that all survive: see gc_paused
def parse_report(raw: bytes) -> Report:
    """Read bytes as a session report v1, or raise `InvalidReport` naming the field."""
    report = parse_document(raw)
    report.trajectory  # noqa: B018 - loading is validating
    return report


@gc_paused()
def parse_document(raw: bytes, limits: Limits = LIMITS) -> Report:
    """Read everything but the trajectory (`Report.trajectory` loads it when asked)."""
    if len(raw) > MAX_REPORT_BYTES:
        raise InvalidReport(
            "$", f"report is {len(raw)} bytes, over the limit of {MAX_REPORT_BYTES} bytes"
        )
    _check_containers(raw, limits)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidReport("$", f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    try:
        data = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except _NotJSON as exc:
        raise InvalidReport("$", str(exc)) from None
    except RecursionError:
        raise InvalidReport("$", "nested too deeply to read") from None
    except json.JSONDecodeError as exc:
        raise InvalidReport(
            "$", f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise InvalidReport("$", f"not readable JSON: {exc}") from None
    if _SURROGATE_ESCAPE.search(text):
        where = _lone_surrogate(data, "")
        if where is not None:
            raise InvalidReport(
                where or "$", "a string holds a lone UTF-16 surrogate (not Unicode)"
            )
    if not isinstance(data, dict):
        raise InvalidReport("$", f"expected a JSON object, got {type(data).__name__}")
    if "schema_version" not in data:
        raise InvalidReport("schema_version", "missing (this verifier reads version '1')")
    if data["schema_version"] != SCHEMA_VERSION:
        raise InvalidReport(
            "schema_version",
            f"unknown schema version {data['schema_version']!r} (this verifier reads '1')",
        )
    _check_counts(data, limits)
    _check_paths(data)
    try:
        doc = ReportDoc.model_validate(data)
    except ValidationError as exc:
        raise _invalid(exc) from None
    return Report(doc, raw, hashlib.sha256(raw).hexdigest())


# A JSON string, escapes included: what lies outside these is structure.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _check_containers(raw: bytes, limits: Limits) -> None:
    """Refuse more JSON objects and arrays than the size allows (`Limits`), before parsing.

    Counting brackets is a bound that strings can only inflate; only when it is
    over the limit are the strings taken out and the brackets counted exactly.
    """
    allowed = limits.containers_free + len(raw) // limits.bytes_per_container
    if raw.count(b"{") + raw.count(b"[") <= allowed:
        return
    outside = _JSON_STRING.sub(b"", raw)
    found = outside.count(b"{") + outside.count(b"[")
    del outside
    if found > allowed:
        raise InvalidReport(
            "$",
            f"holds {found} JSON objects and arrays in {len(raw)} bytes, over the limit of "
            f"{allowed} ({limits.containers_free} plus one per "
            f"{limits.bytes_per_container} bytes)",
        )


def _check_counts(data: dict[str, Any], limits: Limits) -> None:
    """Refuse lists longer than `limits` before validating them (errors are built per item)."""
    trajectory, audit = data.get("trajectory"), data.get("audit")
    contents = trajectory.get("contents") if isinstance(trajectory, dict) else None
    interaction = trajectory.get("interaction") if isinstance(trajectory, dict) else None
    steps = interaction.get("steps") if isinstance(interaction, dict) else None
    entries = audit.get("entries") if isinstance(audit, dict) else None
    for where, value, limit in (
        ("changes", data.get("changes"), limits.changes),
        ("trajectory.contents", contents, limits.contents),
        # A step becomes one part (and at most one turn): the parts' limit bounds it.
        ("trajectory.interaction.steps", steps, limits.parts),
        ("audit.entries", entries, limits.audit_entries),
    ):
        if isinstance(value, list) and len(value) > limit:
            raise InvalidReport(where, f"holds {len(value)} items, over the limit of {limit}")
    if isinstance(contents, list):
        parts = sum(
            len(item["parts"])
            for item in contents
            if isinstance(item, dict) and isinstance(item.get("parts"), list)
        )
        if parts > limits.parts:
            raise InvalidReport(
                "trajectory.contents",
                f"holds {parts} parts in all, over the limit of {limits.parts}",
            )


def _check_paths(data: dict[str, Any]) -> None:
    """Refuse a claimed path holding a control character, naming the claim, the character
    and where it is (the models then check the rest of each claim)."""
    changes = data.get("changes")
    if not isinstance(changes, list):
        return
    for n, change in enumerate(changes):
        path = change.get("path") if isinstance(change, dict) else None
        found = first_control(path) if isinstance(path, str) else None
        if found is not None:
            offset, char = found
            raise InvalidReport(
                f"changes.{n}.path",
                f"control character {codepoint(char)} at offset {offset} (a claimed path "
                "holds none: C0, DEL, C1, U+2028 and U+2029 are refused)",
            )


class _NotJSON(ValueError):
    """Something `json.loads` accepts that RFC 8259 JSON does not allow."""


def _no_constant(name: str) -> Any:
    raise _NotJSON(f"{name} is not a JSON value")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object, refusing a key given twice (parsers disagree on which one wins)."""
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _NotJSON(f"the key {key!r} appears twice in one object")
            seen.add(key)
    return result


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _lone_surrogate(value: Any, where: str) -> str | None:
    """The dotted path of the first string (or key) holding a lone surrogate."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if _lone_surrogate(key, path) is not None:
                return path
            found = _lone_surrogate(item, path)
            if found is not None:
                return found
    if isinstance(value, list):
        for n, item in enumerate(value):
            found = _lone_surrogate(item, f"{where}.{n}" if where else str(n))
            if found is not None:
                return found
    return None


# Problems of one invalid report listed (field and problem each); the rest are counted.
MAX_PROBLEMS_LISTED = 20


def _invalid(exc: ValidationError) -> InvalidReport:
    """Every problem pydantic found, up to `MAX_PROBLEMS_LISTED`, each with its location as
    a dotted field path; the count of the rest."""
    errors = exc.errors()
    listed = [_problem(error) for error in errors[:MAX_PROBLEMS_LISTED]]
    # One location may fail several ways (each member of a union): said once.
    problems = list(dict.fromkeys(listed))
    more = exc.error_count() - len(listed)
    field, problem = problems[0]
    return InvalidReport(field, problem, problems=problems, more=more)


def _problem(error: Any) -> tuple[str, str]:
    """One pydantic error as (field, problem)."""
    loc = error["loc"]
    # A trajectory's format is a tag pydantic puts in the location: the report has no such field.
    if len(loc) > 1 and loc[0] == "trajectory" and loc[1] in TRAJECTORY_FORMATS:
        loc = (loc[0], *loc[2:])
    field = ".".join(str(part) for part in loc) or "$"
    problem = error["msg"]
    if error["type"] in ("union_tag_not_found", "union_tag_invalid") and loc == ("trajectory",):
        field = "trajectory.format"
        given = (
            error.get("input", {}).get("format") if isinstance(error.get("input"), dict) else None
        )
        problem = (
            ("required field is missing" if given is None else f"unknown format {given!r}")
            + " (expected one of "
            + ", ".join(repr(f) for f in TRAJECTORY_FORMATS)
            + ")"
        )
        return field, problem
    if error["type"] == "missing":
        problem = "required field is missing"
    elif error["type"] != "extra_forbidden" and "input" in error:
        shown = json.dumps(error["input"], ensure_ascii=False, default=str)
        problem = f"{problem} (got {shown[:80]})"
    return field, problem


def json_schema() -> dict[str, Any]:
    """The JSON Schema of report v1, generated from the models, each paragraph of a
    description on one line."""
    schema: dict[str, Any] = _unwrapped(ReportDoc.model_json_schema(mode="validation"))
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://verifier.invalid/schemas/session-report-v1.json"
    schema["title"] = "Session report v1"
    return schema


def _unwrapped(node: Any) -> Any:
    """`node` with the lines of each paragraph of its descriptions joined.

    A docstring is wrapped at the source's width; the schema's readers (an editor's
    tooltip, a generated page) wrap it at their own.
    """
    if isinstance(node, list):
        return [_unwrapped(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _unwrapped(value) for key, value in node.items()}
    text = node.get("description")
    if isinstance(text, str):  # not a property named "description", whose value is a schema
        paragraphs = text.split("\n\n")
        out["description"] = "\n\n".join(" ".join(p.split("\n")) for p in paragraphs)
    return out


def schema_text() -> str:
    """The schema as committed: indented, keys sorted, non-ASCII kept, a final newline."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"
