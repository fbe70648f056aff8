"""Text and JSON views of verifications and stored sessions, for people and scripts."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from verifier.findings import CheckResult, CheckStatus, DeliveryStatus, Finding, Verification

if TYPE_CHECKING:  # the store loads SQLAlchemy; printing a verdict does not need it
    from verifier.store import Rates, RunRow, SessionRow

VERDICT_STYLE = {
    DeliveryStatus.DELIVERED.value: "bold green",
    DeliveryStatus.NOT_DELIVERED.value: "bold red",
    DeliveryStatus.INCONCLUSIVE.value: "bold yellow",
}
STATUS_STYLE = {
    CheckStatus.PASS.value: "green",
    CheckStatus.FAIL.value: "red",
    CheckStatus.ERROR.value: "yellow",
    CheckStatus.SKIPPED.value: "dim",
}


def console(stderr: bool = False) -> Console:
    """A console for our tables; pipes and CI logs get 120 columns rather than 80."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(highlight=False, stderr=stderr, width=None if stream.isatty() else 120)


def verdict_text(status: str) -> str:
    style = VERDICT_STYLE.get(status, "")
    return f"[{style}]{status.replace('_', ' ')}[/{style}]" if style else status


def finding_short(finding: Finding) -> str:
    """The code and where: what fits in a table cell."""
    return f"{finding.code} {finding.path}" if finding.path else finding.code


def sessions_table() -> Table:
    table = Table("session", "agent status", "done", "verdict", "first finding")
    table.columns[0].no_wrap = True
    table.columns[3].no_wrap = True
    return table


def verification(console: Console, v: Verification, stored_note: str | None = None) -> None:
    """The readable summary of one verification."""
    done = "done" if v.done else "not done"
    console.print(
        f"session [bold]{escape(v.session_id)}[/bold]   agent: {escape(v.agent_status)} ({done})"
        f"   verdict: {verdict_text(v.delivery_status.value)}"
    )
    for name, result in v.checks.items():
        style = STATUS_STYLE[result.status.value]
        console.print(
            f"  {name:<8} [{style}]{result.status.value:<7}[/{style}] "
            f"{escape(_summary(result))} [dim]({result.duration_s:.2f}s)[/dim]"
        )
        for finding in result.findings:
            console.print(f"    - [bold]{escape(finding.code)}[/bold] {escape(finding.message)}")
            if finding.expected is not None or finding.found is not None:
                console.print(
                    f"      [dim]expected[/dim] {escape(_short(finding.expected))}  "
                    f"[dim]found[/dim] {escape(_short(finding.found))}"
                )
        if result.name == "tests" and result.status is CheckStatus.FAIL:
            tail = str(result.details.get("output_excerpt") or "").rstrip().splitlines()[-6:]
            for line in tail:
                console.print(f"      [dim]| {escape(line)}[/dim]")
        for note in result.notes:
            console.print(f"    [dim]note: {escape(note)}[/dim]")
    for note in v.notes:
        console.print(f"  [dim]note: {escape(note)}[/dim]")
    if stored_note:
        console.print(f"  [dim]{escape(stored_note)}[/dim]")


_HASH = re.compile(r"\b([0-9a-f]{12})[0-9a-f]{52}\b")


def _short(value: str | None) -> str:
    """Hashes cut to 12 digits for reading; the JSON form keeps them whole."""
    return _HASH.sub(r"\1…", str(value))


def _summary(result: CheckResult) -> str:
    d = result.details
    if result.name == "changes" and "claimed" in d:
        return f"{d['claimed']} claimed, {d['changed']} changed ({d['mode']} mode)"
    if result.name == "tests" and "counts" in d:
        c = d["counts"]
        isolated = "no network" if d.get("network_isolated") else "network not isolated"
        if c is None:  # a runner whose tests are not counted
            return f"tests not counted; exit {d.get('exit_code')}; {isolated}"
        return (
            f"{c.get('passed', 0)} passed, {c.get('failed', 0)} failed, "
            f"{c.get('errors', 0)} errors, {c.get('skipped', 0)} skipped; exit "
            f"{d.get('exit_code')}; {isolated}"
        )
    if result.name == "tests" and "reason" in d:
        return str(d["reason"])
    if result.name == "audit" and "entries" in d:
        unknown = d.get("unknown_calls") or []
        extra = f"; unknown tools: {', '.join(unknown)}" if unknown else ""
        return f"{d['entries']} entries, {d['calls']} calls, profile {d['profile']}{extra}"
    return ""


def _pct(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.0%}"


def rates_line(rates: Rates) -> str:
    return (
        f"{rates.sessions} sessions: done rate {_pct(rates.done_rate)} ({rates.done}), "
        f"delivered rate {_pct(rates.delivered_rate)} ({rates.delivered}); "
        f"{rates.not_delivered} not delivered, {rates.inconclusive} inconclusive, "
        f"{rates.unverified} never verified"
    )


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def session_dict(session: SessionRow, runs: Sequence[RunRow]) -> dict[str, Any]:
    """A stored session and all its runs, for ``show --format json``."""
    data = {k: _iso(v) if isinstance(v, datetime) else v for k, v in asdict(session).items()}
    data["runs"] = [
        {
            "id": run.id,
            "verifier_version": run.verifier_version,
            "delivery_status": run.delivery_status.value,
            "verified_at": _iso(run.finished_at),
            "result": run.result,
        }
        for run in runs
    ]
    return data


def session(console: Console, session: SessionRow, runs: Sequence[RunRow]) -> None:
    done = "done" if session.done else "not done"
    console.print(
        f"session [bold]{escape(session.session_id)}[/bold]  agent {escape(session.agent_name)}"
        f" ({escape(session.agent_model or '?')})  repo {escape(session.repo_name)}"
    )
    console.print(
        f"  agent status: {escape(session.raw_status)} ({done}); "
        f"{_iso(session.started_at)} to {_iso(session.ended_at)}; report sha256 "
        f"{session.report_sha256}"
    )
    if not runs:
        console.print("  never verified: run `verifier verify` on its report")
        return
    table = Table("run", "verified at", "verdict", "changes", "tests", "audit", "findings")
    for run in runs:
        table.add_row(
            str(run.id),
            _iso(run.finished_at),
            verdict_text(run.delivery_status.value),
            *(
                str(s.value) if s else "-"
                for s in (run.changes_status, run.tests_status, run.audit_status)
            ),
            str(len(run.findings)),
        )
    console.print(table)
    latest = runs[-1]
    for finding in latest.findings:
        console.print(f"  - [bold]{escape(finding.code)}[/bold] {escape(finding.message)}")


def listing_dict(rows: Sequence[tuple[SessionRow, RunRow | None]], rates: Rates) -> dict[str, Any]:
    return {
        "sessions": [
            {
                "session_id": s.session_id,
                "agent_status": s.raw_status,
                "done": s.done,
                "delivery_status": run.delivery_status.value if run else None,
                "first_finding": run.findings[0].to_dict() if run and run.findings else None,
                "verified_at": _iso(run.finished_at) if run else None,
            }
            for s, run in rows
        ],
        "rates": asdict(rates),
    }


def listing(
    console: Console, rows: Sequence[tuple[SessionRow, RunRow | None]], rates: Rates
) -> None:
    table = sessions_table()
    for s, run in rows:
        first = run.findings[0] if run and run.findings else None
        table.add_row(
            escape(s.session_id),
            escape(s.raw_status),
            "yes" if s.done else "no",
            verdict_text(run.delivery_status.value) if run else "[dim]never verified[/dim]",
            escape(finding_short(first)) if first else "",
        )
    console.print(table)
    console.print(rates_line(rates))


def ingest_table(console: Console, rows: Sequence[dict[str, str]]) -> None:
    table = Table("report", "result", "session", "message")
    table.columns[0].overflow = "fold"
    for row in rows:
        table.add_row(
            escape(row["report"]), row["result"], escape(row["session_id"]), escape(row["message"])
        )
    console.print(table)
