"""Bodies made of what the store reads: a session's summary and detail, its runs, its counts.

The one place that knows both the store's rows and the published bodies.
"""

from __future__ import annotations

from typing import Any

from verifier.app.sessions import trail_note
from verifier.service.api.bodies import (
    AgentBody,
    OverrideBody,
    RepoBody,
    RunSummary,
    SessionDetail,
    SessionSummary,
)
from verifier.store import Counts, Listed, RunRow, Store
from verifier.store.overrides import OverrideRow, overrides


def session_url(session_id: str) -> str:
    return f"/v1/sessions/{session_id}"


def summary(listed: Listed) -> SessionSummary:
    return SessionSummary(**_summary_fields(listed))


def _summary_fields(listed: Listed) -> dict[str, Any]:
    s = listed.session
    latest = listed.latest_run
    return {
        "session_id": s.session_id,
        "url": session_url(s.session_id),
        "task_id": s.task_id,
        "agent_status": s.status,
        "raw_agent_status": s.raw_status,
        "done": s.done,
        "delivery_status": s.delivery_status,
        "override_status": s.override_status,
        "effective_status": listed.effective_status,
        "verified_at": None if latest is None else latest.finished_at,
        "trail_note": trail_note(listed.verdict_run or latest),
        "verdict_run_id": None if listed.verdict_run is None else listed.verdict_run.id,
        "latest_run_id": None if latest is None else latest.id,
        "agent": AgentBody(
            name=s.agent_name,
            version=s.agent_version,
            model=s.agent_model,
            tool_profile=s.tool_profile,
        ),
        "repo": RepoBody(
            name=s.repo_name,
            base_commit=s.base_commit,
            head_commit=s.head_commit,
            branch=s.branch,
        ),
        "started_at": s.started_at,
        "ended_at": s.ended_at,
        "ingested_at": s.ingested_at,
        "report_sha256": s.report_sha256,
    }


def session_detail(store: Store, session_id: str) -> SessionDetail:
    listed = store.listed(session_id)
    runs = store.runs(session_id)
    shown = listed.verdict_run or listed.latest_run
    checks: dict[str, Any] = {} if shown is None else dict(shown.result.get("checks", {}))
    return SessionDetail(
        **_summary_fields(listed),
        checks=checks,
        runs=[_run_summary(r) for r in runs],
        overrides=[_override(o) for o in overrides(store, session_id)],
    )


def _override(row: OverrideRow) -> OverrideBody:
    return OverrideBody(
        id=row.id, at=row.at, author=row.author, status=row.status, reason=row.reason
    )


def _run_summary(run: RunRow) -> RunSummary:
    return RunSummary(
        id=run.id,
        delivery_status=run.delivery_status.value,
        verified_at=run.finished_at,
        started_at=run.started_at,
        duration_s=run.duration_s,
        verifier_version=run.verifier_version,
        # Why the run happened: cli, ingest, reverify, retry, recheck.
        reason=run.reason,
        checks={name: status.value for name, status in run.checks.items()},
    )


def counts(totals: Counts) -> dict[str, Any]:
    return totals.to_dict()
