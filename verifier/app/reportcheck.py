"""`verifier report check`: what a harness author must fix in a report, offline.

A report is checked against everything that needs no repository: the contract
(`verifier.contract.report.parse_report`), claim paths the contract forbids, and the
audit check (`verifier.checks.audit.check`: the hash chain, completeness
against the trajectory, effects against the claims). The repository-side
checks (changes in git, the tests) are `verify`'s; this is the loop a harness
author runs while writing their harness, before any verifier sees the report.

`check_report` turns bytes into a `ReportCheck` (`check_file`: the bytes of a
file, or stdin); `verifier.formats.render` turns that into output.

When an entry's hash does not match, a `HashExplanation` carries the exact
bytes we hashed (RFC 8785 canonical form, after the domain prefix), so the
author can diff them with what their own canonicalizer produced. The same is
given for an arguments or response hash that does not match.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from audit.chain import ENTRY_DOMAIN, entry_hash
from audit.jcs import CanonicalizationError, canonicalize, sha256_hex
from verifier import resources
from verifier._internal.paths import unsafe_reason
from verifier.app.pipeline import Oversized, read_source
from verifier.checks import audit as audit_check
from verifier.config import DEFAULT_MAX_REPORT_BYTES
from verifier.contract.profiles import load_profile
from verifier.contract.report import Report, parse_report
from verifier.errors import InvalidReport
from verifier.findings import Finding

__all__ = ["HashExplanation", "ReportCheck", "check_file", "check_report"]

# The findings whose `path` is a file of the repository, not a field of the report.
_FILE_PATH_CODES = frozenset(
    ("audit.claim_unexplained", "audit.effect_mismatch", "audit.effect_undeclared")
)
_ENTRY_AT = re.compile(r"^audit\.entries\[(\d+)\]")
Kind = Literal["entry", "args", "result"]
_EXPLAINED: dict[str, Kind] = {
    "audit.hash_mismatch": "entry",
    "audit.args_mismatch": "args",
    "audit.result_mismatch": "result",
}


@dataclass(frozen=True)
class HashExplanation:
    """The bytes behind one hash that does not match, for the author to diff.

    `kind` is what was hashed: ``entry`` (the prefix ``audit-entry/v1`` and a
    NUL byte, then the JCS form of the entry without ``hash``), ``args`` (the
    JCS form of the call's ``args``) or ``result`` (of its ``response``).
    `canonical` is the JCS part only; `computed` is our hash of the whole,
    `stated` the report's.
    """

    kind: Kind
    index: int
    seq: object
    call_id: str | None
    canonical: bytes
    computed: str
    stated: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "entry": self.index,
            "seq": self.seq,
            "call_id": self.call_id,
            "prefix": ENTRY_DOMAIN.decode("ascii") if self.kind == "entry" else "",
            "canonical": self.canonical.decode("utf-8"),
            "computed": self.computed,
            "stated": self.stated,
        }


@dataclass(frozen=True)
class ReportCheck:
    """The outcome of checking one report's bytes.

    `invalid` is set when the bytes are not a report v1 at all; then there are
    no findings. `seqs` maps an entry's index to its stated ``seq``, so a
    finding can say which entry it is about as the author numbers them.
    """

    session_id: str | None = None
    profile: str | None = None
    invalid: InvalidReport | None = None
    findings: tuple[Finding, ...] = ()
    explanations: tuple[HashExplanation, ...] = ()
    unknown_calls: tuple[str, ...] = ()
    entries: int = 0
    calls: int = 0
    seqs: Mapping[int, object] = field(default_factory=dict)
    claims: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        """0 valid with no finding, 1 findings, 2 not a valid report."""
        if self.invalid is not None:
            return 2
        return 1 if self.findings else 0

    def where(self, finding: Finding) -> str | None:
        """Where in the report: the field path, with the entry's ``seq`` for an entry.

        Findings about a file carry its repository path; that is shown as a
        file, with the claim that names it when there is one.
        """
        path = finding.path
        if path is None:
            return None
        if finding.code in _FILE_PATH_CODES:
            if path in self.claims:
                return f"file {path} (changes[{self.claims.index(path)}])"
            return f"file {path}"
        m = _ENTRY_AT.match(path)
        if m is not None and int(m.group(1)) in self.seqs:
            return f"{path} (entry seq {json.dumps(self.seqs[int(m.group(1))])})"
        return path

    def finding_dict(self, finding: Finding) -> dict[str, Any]:
        """The finding's JSON form, with the entry's stated ``seq`` when it is about an entry."""
        data = finding.to_dict()
        m = _ENTRY_AT.match(finding.path or "")
        if m is not None and int(m.group(1)) in self.seqs:
            data["seq"] = self.seqs[int(m.group(1))]
        return data


def check_file(source: str, profiles_dir: Path | None = None) -> ReportCheck:
    """`check_report` of the report in the file `source` (``-``: stdin), with the tool
    profiles of `profiles_dir` (default: the packaged ones); a report over the default
    ``max_report_bytes`` is `InvalidReport`, as the verifier would refuse it."""
    raw = read_source(source, DEFAULT_MAX_REPORT_BYTES)
    if isinstance(raw, Oversized):
        raise raw.error()
    return check_report(raw, profiles_dir or resources.profiles_dir())


def check_report(raw: bytes, profiles_dir: Path) -> ReportCheck:
    """Check `raw` as a session report v1, offline.

    The tool profile is the report's ``agent.tool_profile`` in `profiles_dir`
    (``default`` when none is named); a profile that does not exist raises
    `ConfigError`, since the verifier could not judge the report either.
    """
    try:
        report = parse_report(raw)
    except InvalidReport as exc:
        return ReportCheck(invalid=exc)
    profile = load_profile(profiles_dir, report.doc.agent.tool_profile)
    findings = [
        Finding(
            "change.path_unsafe",
            f"{claim.path!r}: {reason}",
            path=f"changes[{n}].path",
            expected="a relative POSIX path inside the repository",
            found=claim.path,
        )
        for n, claim in enumerate(report.doc.changes)
        if (reason := unsafe_reason(claim.path)) is not None
    ]
    result = audit_check.check(report, profile)
    findings.extend(result.findings)
    entries = report.doc.audit.entries
    return ReportCheck(
        session_id=report.session_id,
        profile=profile.name,
        findings=tuple(findings),
        explanations=tuple(_explanations(report, result.findings)),
        unknown_calls=tuple(result.details.get("unknown_calls", ())),
        entries=len(entries),
        calls=len(report.trajectory.calls),
        seqs={i: e.get("seq") for i, e in enumerate(entries) if isinstance(e, Mapping)},
        claims=tuple(c.path for c in report.doc.changes),
    )


def _explanations(report: Report, findings: tuple[Finding, ...]) -> list[HashExplanation]:
    """The hashed bytes behind every hash finding whose bytes we can produce."""
    entries = report.doc.audit.entries
    calls = {c.call_id: c for c in reversed(report.trajectory.calls)}  # the first of an id wins
    out: list[HashExplanation] = []
    for finding in findings:
        kind = _EXPLAINED.get(finding.code)
        m = _ENTRY_AT.match(finding.path or "")
        if kind is None or m is None or finding.found is None:
            continue
        index = int(m.group(1))
        entry = entries[index] if index < len(entries) else None
        if not isinstance(entry, Mapping):
            continue
        call_id = entry.get("call_id") if isinstance(entry.get("call_id"), str) else None
        try:
            if kind == "entry":
                body = {k: v for k, v in entry.items() if k != "hash"}
                canonical, computed = canonicalize(body), entry_hash(entry)
            else:
                call = calls.get(call_id) if call_id is not None else None
                if call is None:
                    continue
                value = call.args if kind == "args" else call.response_object
                if value is None:
                    continue
                canonical = canonicalize(dict(value))
                computed = sha256_hex(canonical)
        except CanonicalizationError:
            continue  # the finding already says there is no JCS form
        out.append(
            HashExplanation(
                kind, index, entry.get("seq"), call_id, canonical, computed, finding.found
            )
        )
    return out
