"""The errors of the recorder's side of `audit`: one root, each message saying what and why.

(`audit` never imports `verifier`, so these are not `verifier.errors`; a face
that calls the recorder catches `AuditError`.)
"""

from __future__ import annotations

__all__ = ["AuditError", "RecorderError", "SignatureError", "UploadError"]


class AuditError(Exception):
    """The root of the errors raised by the recorder, signing and uploading."""


class RecorderError(AuditError):
    """The recorder was used wrongly or cannot write its trail: `field` names what, if anything."""

    def __init__(self, problem: str, field: str | None = None) -> None:
        self.problem = problem
        self.field = field
        super().__init__(f"{field}: {problem}" if field else problem)


class SignatureError(AuditError):
    """A report's signature is missing, malformed or does not verify."""


class UploadError(AuditError):
    """A report could not be delivered to the verifier service; `status` is the last HTTP code."""

    def __init__(self, problem: str, status: int | None = None) -> None:
        self.problem = problem
        self.status = status
        super().__init__(problem)
