"""The one error hierarchy of the verifier.

A broken promise in a report is never an exception: it is a finding
(`verifier.findings`). Exceptions are for what stops us from judging at all. Each
class carries its stable `code` (what the API answers in ``error.code`` and the
command line shows), its HTTP status and its exit code, so every face presents an
error with one lookup::

    VerifierError                 error             500  exit 2
    ├── InvalidReport             invalid_report    400       the bytes are not a report v1
    ├── ConfigError               config            503       our configuration, or a usage mistake
    │   └── PatternsError         tampering_patterns          (checks.tests.tampering)
    ├── BadRequest                bad_request       400       a parameter or option
    ├── Forbidden                 forbidden         403       a token bound to another agent
    │   └── ForeignTrail          foreign_trail               another agent's session's trail
    ├── NotFound                  not_found         404
    │   ├── ReportPruned          pruned            410       the report's bytes were pruned
    │   └── NoStore               no_store                    no database yet (store.engine)
    ├── SessionConflict           conflict          409       same id, other bytes
    ├── WitnessConflict           witness_conflict  409       entries that do not extend the chain
    ├── TaskConflict              task_conflict     409       a task id stored with other tests
    ├── UnknownTask               unknown_task      422  exit 3  a report naming no declared task
    ├── InfrastructureError       infrastructure    503  exit 3  the verdict is inconclusive
    │   ├── MirrorError           mirror                      (_internal.mirror)
    │   ├── SnapshotError         snapshot                    (_internal.snapshot)
    │   ├── SandboxUnavailable    sandbox_unavailable         (_internal.sandbox.runner)
    │   ├── RunnerNotFound        runner_not_found            (_internal.sandbox.runner)
    │   ├── TestInfraError        test_infra                  (checks.tests.testinfra)
    │   ├── NativeReadError       native_read                 (checks.tests.compiled)
    │   ├── ObjectCorrupt         object_corrupt              (_internal.git): a finding too
    │   ├── CopyMismatch          copy_mismatch               (store.maintenance)
    │   └── SourceUnavailable     source_unavailable          (app.gate): no verdicts to read
    ├── LostJob                   lost_job          409  exit 3  a stalled worker's result
    └── Cancelled                 cancelled         503  exit 3  stopped on purpose
        └── Released              released                    by a stop request (service.worker)
    Interrupted (a BaseException)                        exit 128 + signal

A ConfigError is a 503 in the service (the operator's configuration is wrong, not
the client's request) and exit 2 on the command line (the user fixes it). The
errors of `audit` (which never imports this package) have their own root,
`audit.errors.AuditError`, and carry codes the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any


class VerifierError(Exception):
    """Root of every error the verifier raises on purpose."""

    code = "error"
    http_status = 500
    exit_code = 2
    field: str | None = None
    """The field, parameter or header at fault, when one is (the API's ``error.field``)."""

    def problem_text(self) -> str:
        """What is wrong, in words; the field is shown beside it, so it is not repeated."""
        problem = getattr(self, "problem", None)
        return problem if isinstance(problem, str) else str(self)

    def extra(self) -> dict[str, Any]:
        """Facts a face shows beside the problem (the API: keys beside ``error``)."""
        return {}


class InvalidReport(VerifierError):
    """The bytes cannot be read as a session report v1.

    `field` is a dotted path into the report (``repo.base_commit``,
    ``trajectory.contents.3.parts.0``) or ``"$"`` for the whole document, and
    `problem` what is wrong there: the first problem found. `problems` lists every
    problem found, (field, problem) each, the first one first, up to the cap of the
    reader that found them; `more` counts those left out.
    """

    code = "invalid_report"
    http_status = 400
    field: str

    def __init__(
        self,
        field: str,
        problem: str,
        *,
        problems: Sequence[tuple[str, str]] = (),
        more: int = 0,
    ) -> None:
        self.field = field
        self.problem = problem
        self.problems: tuple[tuple[str, str], ...] = tuple(problems) or ((field, problem),)
        self.more = more
        super().__init__(
            f"invalid report: {field}: {problem}"
            if self.count == 1
            else f"invalid report: {self.count} problems; {field}: {problem}; "
            + "; ".join(f"{f}: {p}" for f, p in self.problems[1:])
            + (f"; and {more} more not listed" if more else "")
        )

    @property
    def count(self) -> int:
        """How many problems were found, listed or not."""
        return len(self.problems) + self.more

    def problem_text(self) -> str:
        if self.count == 1:
            return self.problem
        return f"{self.problem} (and {self.count - 1} more problems: see problems)"

    def extra(self) -> dict[str, Any]:
        if self.count == 1:
            return {}
        return {
            "problems": [{"field": f, "problem": p} for f, p in self.problems],
            "more_problems": self.more,
        }


class ConfigError(VerifierError):
    """The verifier's own configuration or command line is wrong."""

    code = "config"
    http_status = 503


class SessionConflict(VerifierError):
    """A session id arrived again with different bytes; the first report stands."""

    code = "conflict"
    http_status = 409
    field = "session_id"

    def __init__(self, session_id: str, stored_sha256: str, new_sha256: str) -> None:
        self.session_id = session_id
        self.stored_sha256 = stored_sha256
        self.new_sha256 = new_sha256
        super().__init__(
            f"session {session_id!r} is already stored with different bytes "
            f"(stored sha256 {stored_sha256}, got {new_sha256}); the stored report is kept"
        )


class NotFound(VerifierError):
    """A session or run the caller named does not exist."""

    code = "not_found"
    http_status = 404


class BadRequest(VerifierError):
    """A query parameter or option the caller gave cannot be used (a filter, a cursor)."""

    code = "bad_request"
    http_status = 400
    field: str

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class Forbidden(VerifierError):
    """The caller may not do this with what it holds (a token bound to another agent)."""

    code = "forbidden"
    http_status = 403
    field: str

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class ForeignTrail(Forbidden):
    """A token bound to one agent posting the trail of a session another agent's report
    or ``session_start`` names (`verifier.store.witness`)."""

    code = "foreign_trail"


class WitnessConflict(VerifierError):
    """Trail entries that do not extend the chain the witness holds: `index` is the first bad."""

    code = "witness_conflict"
    http_status = 409
    field = "entries"

    def __init__(self, index: int, problem: str) -> None:
        self.index = index
        self.problem = problem
        super().__init__(f"entry {index}: {problem}")

    def problem_text(self) -> str:
        # The index leads, as in every other place that shows this error.
        return str(self)

    def extra(self) -> dict[str, Any]:
        return {"index": self.index}


class TaskConflict(VerifierError):
    """A task added under an id the store holds with other content, without asking to
    replace it: the stored task stands."""

    code = "task_conflict"
    http_status = 409
    field = "task_id"

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(
            f"task {task_id!r} is already stored with other content; the stored task stands "
            '(replace it explicitly: `verifier task add --replace`, or `"replace": true`)'
        )


class UnknownTask(VerifierError):
    """A report names a task (``task_id``) the operator never declared, or declared for
    another repository: the session cannot be judged by what it was asked to do, so
    nothing is stored; the report may be sent again once the task is declared."""

    code = "unknown_task"
    http_status = 422
    exit_code = 3
    field = "task_id"

    def __init__(self, task_id: str, problem: str) -> None:
        self.task_id = task_id
        self.problem = problem
        super().__init__(f"task_id: {problem}")


class LostJob(VerifierError):
    """A worker finished a verification for a job it no longer holds (it stalled, and the
    job went to another worker): its result is discarded, the other worker's stands."""

    code = "lost_job"
    http_status = 409
    exit_code = 3


class ReportPruned(NotFound):
    """A session's report bytes were dropped by `verifier prune`; its verdicts remain."""

    code = "pruned"
    http_status = 410

    def __init__(self, session_id: str, pruned_at: datetime | None) -> None:
        self.session_id = session_id
        self.pruned_at = pruned_at
        # (`verifier.moments.utc_text` formats times everywhere else; it raises errors of
        # this module, so this one line cannot call it.)
        when = (
            "at an unknown time"
            if pruned_at is None
            else "on " + pruned_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
        )
        super().__init__(
            f"session {session_id!r}: its report was pruned {when} (`verifier prune`); its "
            "verdicts, findings and report_sha256 are kept, but without the bytes it cannot "
            "be verified again or exported"
        )


class InfrastructureError(VerifierError):
    """Something we depend on could not be used; the verdict is inconclusive."""

    code = "infrastructure"
    http_status = 503
    exit_code = 3


class ObjectCorrupt(InfrastructureError):
    """git served an object whose bytes do not hash to its id (a rewritten loose object,
    an alternate store's copy): what was read is not what the id names.

    An infrastructure error for whoever does not know better (never a pass), and a
    broken promise for the checks, which turn it into ``change.object_corrupt``.
    """

    code = "object_corrupt"

    def __init__(self, oid: str, kind: str, found: str, path: str | None = None) -> None:
        self.oid, self.kind, self.found, self.path = oid, kind, found, path
        where = f" ({path})" if path else ""
        super().__init__(
            f"git served {kind} {oid}{where} with bytes that hash to {found}, not to its id: "
            "the repository's object store holds other bytes under that id"
        )

    def at(self, path: str) -> ObjectCorrupt:
        """The same error, naming the path the object was read for."""
        return ObjectCorrupt(self.oid, self.kind, self.found, path)


class SourceUnavailable(InfrastructureError):
    """The merge gate cannot read the verdicts it is asked about: the store is missing
    or unreadable, the server does not answer or answers wrongly (`verifier.app.gate`).
    The gate decides nothing on it: exit 3, never a pass."""

    code = "source_unavailable"


class Cancelled(VerifierError):
    """Work stopped on purpose (the report turned out invalid, a signal came): no verdict."""

    code = "cancelled"
    http_status = 503
    exit_code = 3


class Interrupted(BaseException):
    """A signal asked us to stop (SIGINT 130, SIGTERM 143): nothing is recorded as a verdict.

    A BaseException, like KeyboardInterrupt, so that no ``except Exception`` on the
    way swallows it; cleanup runs in ``finally`` blocks as it unwinds.
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(f"interrupted by signal {signum}")
