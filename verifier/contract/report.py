"""Session report v1: the input contract (`docs/contract/session-report-v1.md`).

`parse_report(raw)` turns bytes into a `Report`, or raises `InvalidReport`
naming the field and the problem. The raw bytes stay beside the parsed form.
Only what makes the document unreadable as the contract is an error here; a
broken promise inside a readable report (a path outside the root, a hole in the
audit trail) is a finding of one of the checks.

Run ``python -m verifier.contract.report`` to print the JSON Schema generated from
these models (``make schema`` commits it as
``docs/contract/session-report-v1.schema.json`` and its packaged copy
``verifier/contract/report.schema.json``).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
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
    StrictInt,
    StringConstraints,
    ValidationError,
)

from verifier.contract._gc import gc_paused
from verifier.errors import InvalidReport

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

Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-fA-F]{4,64}$")]
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
SessionId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]
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


class _Model(BaseModel):
    """Frozen; fields we do not know are kept, not refused."""

    model_config = ConfigDict(frozen=True, extra="allow")


class Agent(_Model):
    name: Text
    version: Text | None = None
    model: Text | None = None
    tool_profile: Text | None = None


class Repo(_Model):
    name: Text
    path: str | None = None
    url: str | None = None
    base_commit: Hex
    head_commit: Hex | None = None
    branch: Text | None = None


class Usage(_Model):
    turns: StrictInt | None = None
    tool_calls: StrictInt | None = None
    prompt_tokens: StrictInt | None = None
    output_tokens: StrictInt | None = None
    thoughts_tokens: StrictInt | None = None
    cached_tokens: StrictInt | None = None


class ClaimedChange(_Model):
    """A file change the agent claims. The path is checked by the changes check, not here.

    `mode_before` / `mode_after` are optional (None: not claimed), so that a
    change of mode alone (``chmod +x run.sh``: a ``modify`` with equal hashes)
    can be claimed, and reports written before they existed read as they did.
    """

    path: str  # NUL included: the changes check refuses such a path, naming it
    action: Literal["create", "modify", "delete"]
    sha256_before: Sha256 | None
    sha256_after: Sha256 | None
    mode_before: GitMode | None = None
    mode_after: GitMode | None = None


class AgentTests(_Model):
    """What the agent says it ran: recorded, never trusted."""

    command: str | list[str] | None = None
    exit_code: StrictInt | None = None
    summary: str | None = None


# `contents` is emptied once `Report.trajectory` has loaded it (or failed to): the
# SDK's objects replace the raw turns, and keeping both made a dense report cost
# 37 times its size. The raw bytes still hold them as written. (A comment, not a
# docstring: docstrings become descriptions in the published schema.)
class TrajectoryDoc(_Model):
    """The session history as google-genai ``types.Content`` objects, in order."""

    format: Literal["gemini-contents"]
    contents: Objects


# Like `contents`, `steps` is emptied once the trajectory has loaded it.
class InteractionDoc(_Model):
    """An Interactions API ``Interaction`` as the SDK returns it; only ``steps`` is read.

    The other fields (``id``, ``status``, ``model``, ``usage``...) are kept as given.
    """

    id: Text | None = None
    status: Text | None = None
    model: Text | None = None
    steps: Objects


class InteractionTrajectoryDoc(_Model):
    """The session history as the steps of one Interactions API ``Interaction``."""

    format: Literal["gemini-interaction"]
    interaction: InteractionDoc


# The formats a trajectory may take, told apart by `format`.
TRAJECTORY_FORMATS = ("gemini-contents", "gemini-interaction")
AnyTrajectoryDoc = Annotated[
    TrajectoryDoc | InteractionTrajectoryDoc, Field(discriminator="format")
]


class AuditDoc(_Model):
    """Entries stay raw: the audit check judges them, malformed ones included."""

    entries: Objects
    count: StrictInt
    head: str | None = None


class Signature(_Model):
    alg: Literal["hmac-sha256", "ed25519"]
    key_id: str | None = None
    value: str


class ReportDoc(_Model):
    """The JSON document, as the contract names its fields."""

    schema_version: Literal["1"]
    session_id: SessionId
    agent: Agent
    task: str | None = None
    repo: Repo
    started_at: Timestamp
    ended_at: Timestamp
    status: Text
    final_text: str | None = None
    usage: Usage | None = None
    changes: list[ClaimedChange]
    tests: AgentTests | None = None
    trajectory: AnyTrajectoryDoc
    audit: AuditDoc
    signature: Signature | None = None
    extensions: dict[str, Any] | None = None


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


def _invalid(exc: ValidationError) -> InvalidReport:
    """The first problem pydantic found, with its location as a dotted field path."""
    error = exc.errors()[0]
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
        return InvalidReport(field, problem)
    if error["type"] == "missing":
        problem = "required field is missing"
    elif error["type"] != "extra_forbidden" and "input" in error:
        shown = json.dumps(error["input"], ensure_ascii=False, default=str)
        problem = f"{problem} (got {shown[:80]})"
    more = exc.error_count() - 1
    if more:
        problem += f"; and {more} more problem{'s' if more > 1 else ''}"
    return InvalidReport(field, problem)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of report v1, generated from the models."""
    schema = ReportDoc.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://verifier.invalid/schemas/session-report-v1.json"
    schema["title"] = "Session report v1"
    return schema


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"


if __name__ == "__main__":  # pragma: no cover - `make schema`
    sys.stdout.write(schema_text())
