"""The one error hierarchy of the verifier.

A broken promise in a report is never an exception: it is a finding
(`verifier.findings`). Exceptions are for what stops us from judging at all:
a report we cannot read as the contract (`InvalidReport`, exit 2), a usage or
configuration mistake (`ConfigError`, exit 2), a conflict in the store
(`SessionConflict`, exit 2), and infrastructure we could not use
(`InfrastructureError`, which makes a verdict inconclusive, exit 3).
"""

from __future__ import annotations

from datetime import UTC, datetime


class VerifierError(Exception):
    """Root of every error the verifier raises on purpose."""

    exit_code = 2


class InvalidReport(VerifierError):
    """The bytes cannot be read as a session report v1.

    `field` is a dotted path into the report (``repo.base_commit``,
    ``trajectory.contents.3.parts.0``) or ``"$"`` for the whole document.
    """

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"invalid report: {field}: {problem}")


class ConfigError(VerifierError):
    """The verifier's own configuration or command line is wrong."""


class SessionConflict(VerifierError):
    """A session id arrived again with different bytes; the first report stands."""

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


class BadRequest(VerifierError):
    """A query parameter or option the caller gave cannot be used (a filter, a cursor)."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class Forbidden(VerifierError):
    """The caller may not do this with what it holds (a token bound to another agent)."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class WitnessConflict(VerifierError):
    """Trail entries that do not extend the chain the witness holds: `index` is the first bad."""

    def __init__(self, index: int, problem: str) -> None:
        self.index = index
        self.problem = problem
        super().__init__(f"entry {index}: {problem}")


class LostJob(VerifierError):
    """A worker finished a verification for a job it no longer holds (it stalled, and the
    job went to another worker): its result is discarded, the other worker's stands."""

    exit_code = 3


class ReportPruned(NotFound):
    """A session's report bytes were dropped by `verifier prune`; its verdicts remain."""

    def __init__(self, session_id: str, pruned_at: datetime | None) -> None:
        self.session_id = session_id
        self.pruned_at = pruned_at
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

    exit_code = 3


class Cancelled(VerifierError):
    """Work stopped on purpose (the report turned out invalid, a signal came): no verdict."""

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
