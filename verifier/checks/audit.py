"""The audit check: the harness's hash-chained trail against the trajectory and the claims.

Steps of `check`:

1. normalise every call of the trajectory with the report's tool profile, so
   calls the profile does not know are reported (in ``details``), never dropped;
2. hand the trail, the calls with their responses and the claims to the
   ``audit`` package, which verifies the chain and its completeness;
3. add what only the report can tell: a call id used twice, calls outside model
   turns, responses that answer no call, and a ``session_end`` status that
   differs from the report's status (aliases compared as their canonical form);
4. against what the witness saw while the session ran (`Context.witnessed`,
   handed in by the pipeline): the trail must extend the witnessed prefix
   exactly (``audit.witness_mismatch``); an agent configured with
   ``require_witness`` whose trail is not witnessed whole is inconclusive
   (``audit.unwitnessed``); the signature as the configured keys judge it
   (`verifier.contract.signatures`) goes into ``details``.

A report without a trail (``audit.trail = "none"``: made afterwards, from a
gemini-cli transcript say) has nothing to check: it is inconclusive
(``audit.no_trail``) unless its repository accepts such sessions
(``trail = "optional"``), then a pass with a note (`no_trail`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from audit import Call, Change, verify_trail
from audit.findings import Finding
from verifier.checks.base import Context, WitnessedPrefix
from verifier.config import Config, RepositoryConfig
from verifier.contract.profiles import ActionKind, Profile, load_profile
from verifier.contract.report import Report, canonical_status
from verifier.errors import ConfigError
from verifier.findings import CheckResult, CheckStatus

if TYPE_CHECKING:  # loading the SDK is the report's business, on first use of its trajectory
    from verifier.contract.trajectory import ToolCall

NAME = "audit"


class AuditCheck:
    """Step 3 of the verdict: the trail against the trajectory and the claims."""

    name = NAME
    title = "Audit"
    prefixes: Mapping[str, str] = {
        "audit.": "the audit check: the harness's hash-chained audit trail",
    }
    launches = False
    reads: tuple[str, ...] = ()

    def run(self, context: Context) -> CheckResult:
        context.launched.wait()  # the trajectory loads the SDK: after the tests have started
        profile, note = _profile(context.report, context.config)
        if context.report.doc.audit.trail == "none":
            result = no_trail(context.report, profile, context.repo, context.config)
            return replace(result, notes=(*result.notes, note)) if note else result
        result = check(context.report, profile)
        result = trusted(result, context.report, context.config, context.witnessed)
        return replace(result, notes=(*result.notes, note)) if note else result


CHECK = AuditCheck()


def _profile(report: Report, config: Config) -> tuple[Profile, str | None]:
    """The report's tool profile; one we do not have leaves every call unknown, with a note."""
    name = report.doc.agent.tool_profile
    try:
        return load_profile(config.profiles_dir, name), None
    except ConfigError as exc:
        return Profile(name or "default"), f"{exc}: every call is reported as unknown"


def no_trail(
    report: Report, profile: Profile, repo: RepositoryConfig | None, config: Config | None
) -> CheckResult:
    """A report without a trail (`audit.trail = "none"`): inconclusive, unless the
    repository accepts such sessions (`trail = "optional"`) and the agent needs no
    witness; then a pass that says what it rests on.

    Nothing of the trail can be checked, so none of it is: the calls, their
    responses and their effects are the report's word, which the replay and
    changes checks still hold against the repository.
    """
    calls = report.trajectory.calls
    actions = [profile.normalise(call) for call in calls]
    details: dict[str, Any] = {
        "trail": "none",
        "entries": 0,
        "calls": len(calls),
        "profile": profile.name,
        "unknown_calls": sorted({a.call.name for a in actions if a.kind is ActionKind.UNKNOWN}),
        "actions": _count_actions(actions),
    }
    agent = config.agents.get(report.doc.agent.name) if config is not None else None
    witnessed = agent is not None and agent.require_witness
    if repo is None or repo.trail != "optional" or witnessed:
        if witnessed:
            why = f"agent {report.doc.agent.name!r} requires a witnessed trail"
        elif repo is None:
            why = 'a repository accepts one only with trail = "optional"'
        else:
            why = f'repository {repo.name!r} requires one (trail = "optional" accepts it)'
        return CheckResult(
            NAME,
            CheckStatus.ERROR,
            (
                Finding(
                    "audit.no_trail",
                    "the report has no audit trail (audit.trail = 'none'): nothing proves "
                    f"which calls ran, in what order, with what effects; {why}",
                    path="audit.trail",
                    expected="recorded",
                    found="none",
                ),
            ),
            details,
        )
    note = (
        "no audit trail (audit.trail = 'none'), accepted by the repository's trail = "
        "'optional': the calls and their effects are the report's word, checked only "
        "against the repository by the changes and replay checks"
    )
    return CheckResult(NAME, CheckStatus.PASS, (), details, notes=(note,))


def check(report: Report, profile: Profile) -> CheckResult:
    """Verify the audit trail of `report` (one without a trail: `no_trail`, no policy)."""
    if report.doc.audit.trail == "none":
        return no_trail(report, profile, None, None)
    # 1. Normalise the calls with the tool profile.
    actions = [profile.normalise(call) for call in report.trajectory.calls]
    unknown = sorted({a.call.name for a in actions if a.kind is ActionKind.UNKNOWN})

    # 2. Chain and completeness, in the audit package.
    calls = [Call(c.call_id, c.name, c.args, c.response_object) for c in report.trajectory.calls]
    claims = [
        Change(c.path, c.sha256_before, c.sha256_after, c.mode_before, c.mode_after)
        for c in report.doc.changes
    ]
    audit_doc: dict[str, Any] = {
        "entries": report.doc.audit.entries,
        "count": report.doc.audit.count,
        "head": report.doc.audit.head,
    }
    findings = list(
        verify_trail(audit_doc, session_id=report.session_id, calls=calls, claims=claims)
    )

    # 3. What only the report can tell.
    findings.extend(
        Finding(
            "audit.response_without_call",
            f"trajectory turn {o.turn} part {o.part}: a function_response "
            f"({o.name!r}, id {o.id!r}) answers no call of the model turn before it",
            path=report.trajectory.location(o.turn, o.part),
        )
        for o in report.trajectory.orphan_responses
    )
    seen: dict[str, ToolCall] = {}
    for c in report.trajectory.calls:
        if c.call_id in seen:
            first = seen[c.call_id]
            findings.append(
                Finding(
                    "audit.duplicate_call_id",
                    f"call id {c.call_id!r} is used by two calls (turn {first.turn} part "
                    f"{first.part} and turn {c.turn} part {c.part}): each call needs its own "
                    "audit entry",
                    path=report.trajectory.location(c.turn, c.part),
                    expected="a call id used once",
                    found=c.call_id,
                )
            )
        seen.setdefault(c.call_id, c)
    findings.extend(
        Finding(
            "audit.call_outside_model_turn",
            f"trajectory turn {c.turn} part {c.part}: a function_call ({c.name!r}) in a "
            "turn whose role is not 'model'",
            path=report.trajectory.location(c.turn, c.part),
            expected="model",
            found=str(report.trajectory.contents[c.turn].role),
        )
        for c in report.trajectory.misplaced_calls
    )
    entries = report.doc.audit.entries
    if entries and entries[-1].get("kind") == "session_end":
        ended = entries[-1].get("status")
        if not isinstance(ended, str) or canonical_status(ended) != report.status:
            findings.append(
                Finding(
                    "audit.status_mismatch",
                    "the trail's session_end status differs from the report's status",
                    expected=report.doc.status,
                    found=str(ended),
                )
            )
    details = {
        "entries": len(entries),
        "calls": len(calls),
        "profile": profile.name,
        "unknown_calls": unknown,
        "actions": _count_actions(actions),
    }
    return CheckResult.from_findings(NAME, findings, details)


def trusted(
    result: CheckResult, report: Report, config: Config, prefix: WitnessedPrefix | None
) -> CheckResult:
    """`result` with step 4: the witnessed prefix and the signature."""
    from verifier.contract import signatures

    entries = report.doc.audit.entries
    findings = list(result.findings)
    notes = list(result.notes)
    details = dict(result.details)
    agent = config.agents.get(report.doc.agent.name)

    try:
        assessed = signatures.assess(json.loads(report.raw), config)
    except ConfigError as exc:  # a key the verifier should hold is missing (its environment)
        details["signature"] = {"state": "unchecked", "verified": False, "problem": str(exc)}
        notes.append(f"signature not checked: {exc}")
    else:
        details["signature"] = assessed.to_dict()
        notes.extend(n for n in (assessed.note(),) if n is not None)

    if prefix is None:
        details["witness"] = None
        notes.append("the witness was not consulted (no store): the trail's timing is unproven")
        if agent is not None and agent.require_witness:
            prefix = WitnessedPrefix((), ())  # nothing says it was witnessed: inconclusive
    else:
        details["witness"] = _witness_details(prefix, len(entries))
    if prefix is not None:
        mismatch = _witness_mismatch(prefix, entries)
        if mismatch is not None:
            findings.append(mismatch)
        elif prefix.count < len(entries) and agent is not None and agent.require_witness:
            unwitnessed = Finding(
                "audit.unwitnessed",
                f"only {prefix.count} of the trail's {len(entries)} entries were witnessed "
                f"while the session ran; agent {agent.name!r} requires a witnessed trail",
                path="audit.entries",
                expected=f"{len(entries)} entries witnessed",
                found=f"{prefix.count} witnessed",
            )
            if not findings:
                return replace(
                    result,
                    status=CheckStatus.ERROR,
                    findings=(unwitnessed,),
                    details=details,
                    notes=tuple(notes),
                )
            findings.append(unwitnessed)
    status = CheckStatus.FAIL if findings else result.status
    return replace(
        result, status=status, findings=tuple(findings), details=details, notes=tuple(notes)
    )


def _witness_mismatch(prefix: WitnessedPrefix, entries: Sequence[Any]) -> Finding | None:
    """The first witnessed entry the trail rewrites or drops, if any."""
    for i, witnessed_hash in enumerate(prefix.hashes):
        entry = entries[i] if i < len(entries) else None
        stated = entry.get("hash") if isinstance(entry, Mapping) else None
        if stated != witnessed_hash:
            what = "drops" if entry is None else "rewrites"
            return Finding(
                "audit.witness_mismatch",
                f"the trail {what} entry {i}, which the witness received at "
                f"{_iso(prefix.received[i])}: the report's trail is not the one written "
                f"while the session ran ({prefix.count} entries witnessed)",
                path=f"audit.entries[{i}]",
                expected=witnessed_hash,
                found="missing" if entry is None else str(stated),
            )
    return None


def _witness_details(prefix: WitnessedPrefix, total: int) -> dict[str, Any]:
    return {
        "entries": f"{prefix.count} of {total}",
        "witnessed": prefix.count,
        "total": total,
        "first_seen": _iso(prefix.received[0]) if prefix.received else None,
        "last_seen": _iso(prefix.received[-1]) if prefix.received else None,
    }


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _count_actions(actions: list[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for action in actions:
        counts[action.kind.value] = counts.get(action.kind.value, 0) + 1
    return counts
