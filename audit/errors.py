"""The errors of `audit`: one root, each class with its stable `code`, each message saying
what and why.

(`audit` never imports `verifier`, so these are not `verifier.errors`; a face
that calls the recorder or reads a bundle catches `AuditError`.)::

    AuditError              audit
    ├── RecorderError       recorder          the recorder used wrongly, or its trail unwritable
    ├── SignatureError      signature         a report's signature missing, malformed or wrong
    ├── UploadError         upload            a report not delivered to the service
    ├── TranscriptError     transcript        a gemini-cli transcript unreadable (audit.geminicli)
    ├── BundleError         bundle            an evidence bundle refused (audit.bundle)
    ├── EnvelopeError       envelope          a DSSE envelope unreadable or unsigned (audit.dsse)
    ├── CanonicalizationError  canonicalization  a value with no JCS form (audit.jcs)
    └── PathOutsideRoot     path_outside_root a path outside the repository (audit._worktree)

The last three are also `ValueError`s, as they were before they joined this root.
"""

from __future__ import annotations

__all__ = ["AuditError", "RecorderError", "SignatureError", "TranscriptError", "UploadError"]


class AuditError(Exception):
    """The root of the errors raised by the recorder, signing, uploading and bundles."""

    code = "audit"


class RecorderError(AuditError):
    """The recorder was used wrongly or cannot write its trail: `field` names what, if anything."""

    code = "recorder"

    def __init__(self, problem: str, field: str | None = None) -> None:
        self.problem = problem
        self.field = field
        super().__init__(f"{field}: {problem}" if field else problem)


class SignatureError(AuditError):
    """A report's signature is missing, malformed or does not verify."""

    code = "signature"


class UploadError(AuditError):
    """A report could not be delivered to the verifier service; `status` is the last HTTP code."""

    code = "upload"

    def __init__(self, problem: str, status: int | None = None) -> None:
        self.problem = problem
        self.status = status
        super().__init__(problem)


class TranscriptError(AuditError):
    """A gemini-cli transcript cannot be read: `line` (1-based) and `field` say where."""

    code = "transcript"

    def __init__(self, problem: str, line: int | None = None, field: str | None = None) -> None:
        self.problem = problem
        self.line = line
        self.field = field
        where = ", ".join(
            w for w in (f"line {line}" if line else "", f"field {field!r}" if field else "") if w
        )
        super().__init__(f"transcript: {where}: {problem}" if where else f"transcript: {problem}")
