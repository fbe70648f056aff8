"""Text and JSON views of verifications and stored sessions: pure functions to strings.

Every view takes data and returns the text to write, with no I/O, so one
verdict renders the same in every face and each format is tested alone. The
text views use rich, imported only when text is asked for; JSON needs nothing.
A check's details are read defensively: any check, status or finding renders,
whatever it put in its details.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from verifier.findings import CheckResult, CheckStatus, DeliveryStatus, Finding, Verification
from verifier.moments import utc_text

if TYPE_CHECKING:  # the store loads SQLAlchemy, rich costs an import: neither is needed for JSON
    from rich.console import Console
    from rich.table import Table

    from verifier.app.adapters import Inventory, Scan, Shadow
    from verifier.contract.profiles import Action
    from verifier.store import Counts, Listed, RunRow, SessionRow
    from verifier.store.overrides import OverrideRow

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
_HASH = re.compile(r"\b([0-9a-f]{12})[0-9a-f]{52}\b")


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def progress_printer() -> Callable[[str], None]:
    """Progress lines on stderr, dimmed on a terminal."""
    return lambda line: click.echo(click.style(f"… {line}", dim=True), err=True)


def _console(width: int | None = None) -> tuple[Console, io.StringIO]:
    """A console writing into a string; colours when stdout is a terminal, 120 columns
    for pipes and CI logs rather than 80."""
    from rich.console import Console

    out = io.StringIO()
    tty = sys.stdout.isatty()
    console = Console(
        file=out,
        highlight=False,
        force_terminal=tty,
        no_color=not tty,
        width=width or (None if tty else 120),
    )
    return console, out


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def verdict_text(status: str) -> str:
    style = VERDICT_STYLE.get(status, "dim")
    return f"[{style}]{status.replace('_', ' ')}[/{style}]"


def finding_short(finding: Finding) -> str:
    """The code and where: what fits in a table cell."""
    return f"{finding.code} {finding.path}" if finding.path else finding.code


# -- one verification -----------------------------------------------------------------


def verification_json(v: Verification, stored: str | None = None) -> str:
    """The ``--format json`` object."""
    data = v.to_dict()
    if stored is not None:
        data["stored"] = stored
    return dumps(data)


def verification_text(v: Verification, stored: str | None = None, width: int | None = None) -> str:
    """The readable summary of one verification."""
    console, out = _console(width)
    esc = _escape
    done = "done" if v.done else "not done"
    console.print(
        f"session [bold]{esc(v.session_id)}[/bold]   agent: {esc(v.agent_status)} ({done})"
        f"   verdict: {verdict_text(v.delivery_status.value)}"
    )
    for name, result in v.checks.items():
        style = STATUS_STYLE.get(result.status.value, "")
        console.print(
            f"  {esc(name):<8} [{style}]{result.status.value:<7}[/{style}] "
            f"{esc(summary(result))} [dim]({result.duration_s:.2f}s)[/dim]"
        )
        for finding in result.findings:
            console.print(f"    - [bold]{esc(finding.code)}[/bold] {esc(finding.message)}")
            if finding.expected is not None or finding.found is not None:
                console.print(
                    f"      [dim]expected[/dim] {esc(_short(finding.expected))}  "
                    f"[dim]found[/dim] {esc(_short(finding.found))}"
                )
        for note in result.notes:
            console.print(f"    [dim]note: {esc(note)}[/dim]")
        excerpt = result.details.get("output_excerpt")
        if result.status is CheckStatus.FAIL and isinstance(excerpt, str):
            for line in excerpt.rstrip().splitlines()[-6:]:
                console.print(f"      [dim]| {esc(line)}[/dim]")
    for note in v.notes:
        console.print(f"  [dim]note: {esc(note)}[/dim]")
    if stored:
        console.print(f"  [dim]{esc(stored)}[/dim]")
    return out.getvalue()


def _short(value: str | None) -> str:
    """Hashes cut to 12 digits for reading; the JSON form keeps them whole."""
    return _HASH.sub(r"\1…", str(value))


def summary(result: CheckResult) -> str:
    """One line of figures from a check's details; empty when it has none we know."""
    d = result.details
    if "reason" in d:
        return str(d["reason"])
    if result.name == "changes" and "claimed" in d:
        return f"{d['claimed']} claimed, {d.get('changed', '?')} changed ({d.get('mode')} mode)"
    if result.name == "tests" and "exit_code" in d:
        isolated = "no network" if d.get("network_isolated") else "network not isolated"
        if d.get("timed_out"):
            ran = f"killed at the timeout after {d.get('duration_s', '?')}s"
        else:
            ran = f"exit {d.get('exit_code')}"
        counts = d.get("counts")
        if isinstance(counts, Mapping):
            counted = (
                f"{counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed, "
                f"{counts.get('errors', 0)} errors, {counts.get('skipped', 0)} skipped"
            )
        else:
            counted = "tests not counted"
        return f"{counted}; {ran}; {isolated}"
    if result.name == "audit" and "entries" in d:
        unknown = d.get("unknown_calls") or []
        extra = f"; unknown tools: {', '.join(map(str, unknown))}" if unknown else ""
        return f"{d['entries']} entries, {d.get('calls')} calls, profile {d.get('profile')}{extra}"
    return ""


# -- stored sessions ------------------------------------------------------------------


def _pct(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.0%}"


def rates_line(rates: Counts) -> str:
    return (
        f"{rates.conclusive} of {rates.total} sessions with a verdict: "
        f"done rate {_pct(rates.done_rate)} ({rates.done_conclusive}), "
        f"delivered rate {_pct(rates.delivered_rate)} ({rates.delivered}); "
        f"{rates.silent_failures} silent failures (done, not delivered); "
        f"{rates.inconclusive} inconclusive, {rates.pending} pending"
    )


def overridden_line(overridden: int) -> str:
    """What the rates count: the computed verdicts, never a person's override."""
    return (
        f"the rates count computed verdicts: {overridden} "
        f"session{' carries' if overridden == 1 else 's carry'} a person's override, "
        "shown beside the verdict and not counted"
    )


def run_dict(run: RunRow) -> dict[str, Any]:
    return {
        "id": run.id,
        "verifier_version": run.verifier_version,
        "delivery_status": run.delivery_status.value,
        "checks": {name: status.value for name, status in run.checks.items()},
        "verified_at": utc_text(run.finished_at),
        "result": run.result,
    }


def session_dict(
    session: SessionRow, runs: Sequence[RunRow], overrides: Sequence[OverrideRow] = ()
) -> dict[str, Any]:
    """A stored session and all its runs, for ``show --format json``.

    `delivery_status` is the latest conclusive verdict (or the latest run's status
    when there is none, or ``pending``); `latest_run` is the latest run;
    `override_status` a person's standing override, `effective_status` the
    override or else the computed verdict, `overrides` every override, oldest first.
    """
    data = {k: utc_text(v) if isinstance(v, datetime) else v for k, v in asdict(session).items()}
    conclusive = [r for r in runs if r.delivery_status is not DeliveryStatus.INCONCLUSIVE]
    verdict = conclusive[-1] if conclusive else (runs[-1] if runs else None)
    data["delivery_status"] = verdict.delivery_status.value if verdict else "pending"
    data["effective_status"] = session.override_status or data["delivery_status"]
    data["overrides"] = [o.to_dict() for o in overrides]
    data["latest_run"] = run_dict(runs[-1]) if runs else None
    data["runs"] = [run_dict(run) for run in runs]
    return data


def session_text(
    session: SessionRow,
    runs: Sequence[RunRow],
    width: int | None = None,
    overrides: Sequence[OverrideRow] = (),
) -> str:
    from rich.table import Table

    console, out = _console(width)
    esc = _escape
    done = "done" if session.done else "not done"
    console.print(
        f"session [bold]{esc(session.session_id)}[/bold]  agent {esc(session.agent_name)}"
        f" ({esc(session.agent_model or '?')})  repo {esc(session.repo_name)}"
    )
    console.print(
        f"  agent status: {esc(session.raw_status)} ({done}); "
        f"{utc_text(session.started_at)} to {utc_text(session.ended_at)}; report sha256 "
        f"{session.report_sha256}"
    )
    if not runs:
        console.print("  never verified: run `verifier verify` on its report")
        _overrides_text(console, session, overrides)
        return out.getvalue()
    names = list(dict.fromkeys(name for run in runs for name in run.checks))
    table = Table("run", "verified at", "verdict", *names, "findings")
    for run in runs:
        statuses = [run.checks[n].value if n in run.checks else "-" for n in names]
        table.add_row(
            str(run.id),
            utc_text(run.finished_at),
            verdict_text(run.delivery_status.value),
            *statuses,
            str(len(run.findings)),
        )
    console.print(table)
    data = session_dict(session, runs)
    console.print(f"  verdict: {verdict_text(data['delivery_status'])}")
    shown = next(r for r in reversed(runs) if r.delivery_status.value == data["delivery_status"])
    for finding in shown.findings:
        console.print(f"  - [bold]{esc(finding.code)}[/bold] {esc(finding.message)}")
    _overrides_text(console, session, overrides)
    return out.getvalue()


def _overrides_text(
    console: Console, session: SessionRow, overrides: Sequence[OverrideRow]
) -> None:
    """The override standing beside the computed verdict, and every override made."""
    if session.override_status is not None:
        console.print(
            f"  override: {verdict_text(session.override_status)} "
            "(a person's verdict; the computed one above stands beside it)"
        )
    for o in overrides:
        console.print(
            f"  - {utc_text(o.at)} {_escape(o.author)}: {o.status.replace('_', ' ')}: "
            f"{_escape(o.reason)}"
        )


def listing_dict(rows: Sequence[Listed], rates: Counts, overridden: int = 0) -> dict[str, Any]:
    def first(run: RunRow | None) -> dict[str, Any] | None:
        return run.findings[0].to_dict() if run is not None and run.findings else None

    return {
        "sessions": [
            {
                "session_id": row.session.session_id,
                "agent_status": row.session.raw_status,
                "done": row.session.done,
                "delivery_status": row.delivery_status,
                "override_status": row.session.override_status,
                "effective_status": row.effective_status,
                "first_finding": first(row.verdict_run or row.latest_run),
                "verified_at": utc_text(row.verdict_run.finished_at) if row.verdict_run else None,
                "latest_run": None
                if row.latest_run is None
                else {
                    "id": row.latest_run.id,
                    "delivery_status": row.latest_run.delivery_status.value,
                    "verified_at": utc_text(row.latest_run.finished_at),
                },
            }
            for row in rows
        ],
        "rates": {**rates.to_dict(), "verdicts": "computed", "overridden": overridden},
    }


def sessions_table() -> Table:
    from rich.table import Table

    table = Table("session", "agent status", "done", "verdict", "first finding")
    table.columns[0].no_wrap = True
    table.columns[3].no_wrap = True
    return table


def session_row(
    session_id: str, agent_status: str, done: bool, verdict: str, first: Finding | None
) -> tuple[str, ...]:
    return (
        _escape(session_id),
        _escape(agent_status),
        "yes" if done else "no",
        verdict_text(verdict) if verdict != "pending" else "[dim]pending[/dim]",
        _escape(finding_short(first)) if first else "",
    )


def listing_text(
    rows: Sequence[Listed], rates: Counts, width: int | None = None, overridden: int = 0
) -> str:
    console, out = _console(width)
    table = sessions_table()
    for row in rows:
        run = row.verdict_run or row.latest_run
        verdict = row.delivery_status
        cells = list(
            session_row(
                row.session.session_id,
                row.session.raw_status,
                row.session.done,
                verdict,
                run.findings[0] if run and run.findings else None,
            )
        )
        latest = row.latest_run
        if latest is not None and row.verdict_run is not None and latest.id != row.verdict_run.id:
            cells[3] += f" [dim](latest run {latest.delivery_status.value.replace('_', ' ')})[/dim]"
        if row.session.override_status is not None:
            cells[3] += f" [bold]overridden: {row.session.override_status.replace('_', ' ')}[/bold]"
        table.add_row(*cells)
    console.print(table)
    console.print(rates_line(rates))
    console.print(overridden_line(overridden))
    return out.getvalue()


def ingest_json(rows: Sequence[dict[str, str]]) -> str:
    return dumps(list(rows))


def ingest_text(rows: Sequence[dict[str, str]], width: int | None = None) -> str:
    from rich.table import Table

    console, out = _console(width)
    table = Table("report", "result", "session", "message")
    table.columns[0].overflow = "fold"
    for row in rows:
        table.add_row(
            _escape(row["report"]),
            row["result"],
            _escape(row["session_id"]),
            _escape(row["message"]),
        )
    console.print(table)
    return out.getvalue()


def toml_like(settings: Mapping[str, Any]) -> str:
    """Settings as TOML-looking lines, for reading (not for parsing)."""
    lines = ["[verifier]"]
    repos = settings.get("repositories") or {}
    lines += [f"{k} = {json.dumps(v)}" for k, v in settings.items() if k != "repositories"]
    for name, table in repos.items():
        lines += ["", f"[repositories.{name}]"]
        lines += [f"{k} = {json.dumps(v)}" for k, v in table.items() if k != "name"]
    return "\n".join(lines)


# -- adapters: shadow mode and the migration inventory --------------------------------------


def _scan_dict(scan: Scan) -> dict[str, Any]:
    return {
        "sessions": scan.sessions,
        "calls": scan.calls,
        "skipped_pruned": len(scan.pruned),
        "pruned": list(scan.pruned),
        "unreadable": dict(scan.unreadable),
    }


def _reading(action: Action) -> dict[str, Any]:
    from verifier.app.adapters import permission

    return {
        "kind": action.kind.value,
        "params": _jsonable(dict(action.params)),
        "problems": list(action.problems),
        "permission": permission(action),
    }


def _jsonable(value: Any) -> Any:
    """A model's argument as JSON holds it (it may be anything the SDK accepted)."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def shadow_dict(result: Shadow) -> dict[str, Any]:
    """Shadow mode as data: every call the profiles read differently, both readings."""
    return {
        "old": result.old,
        "new": result.new,
        "agree": result.exit_code == 0,
        "disagreements": result.disagreements,
        **_scan_dict(result.scan),
        "calls_differing": [
            {
                "session_id": d.session_id,
                "call_id": d.call_id,
                "name": d.name,
                "location": d.location,
                "matters": d.matters,
                "old": _reading(d.old),
                "new": _reading(d.new),
                "differences": [
                    {
                        "kind": x.kind,
                        "field": x.field,
                        "old": _jsonable(x.old),
                        "new": _jsonable(x.new),
                        "matters": x.matters,
                    }
                    for x in d.differences
                ],
            }
            for d in result.diffs
        ],
    }


def _cell(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return _escape(text if len(text) <= limit else text[: limit - 1] + "…")


def shadow_text(result: Shadow, width: int | None = None) -> str:
    """One table row per difference; then whether the profiles agree."""
    from rich.table import Table

    console, out = _console(width)
    if result.diffs:
        table = Table("session", "call", "function", "difference", "field", result.old, result.new)
        for d in result.diffs:
            for x in d.differences:
                kind = x.kind if x.matters else f"[dim]{x.kind}[/dim]"
                table.add_row(
                    _escape(d.session_id),
                    _escape(d.call_id),
                    _escape(d.name),
                    kind,
                    _escape(x.field or ""),
                    _cell(x.old),
                    _cell(x.new),
                )
        console.print(table)
    scan = result.scan
    read = f"{scan.sessions:,} sessions, {scan.calls:,} calls read"
    if scan.pruned:
        read += f"; {len(scan.pruned):,} pruned sessions skipped"
    if scan.unreadable:
        read += f"; {len(scan.unreadable):,} unreadable reports skipped"
    console.print(read)
    if result.disagreements:
        console.print(
            f"[bold red]profiles {_escape(result.old)} and {_escape(result.new)} disagree on "
            f"{result.disagreements:,} calls[/bold red]"
        )
    else:
        console.print(
            f"[bold green]profiles {_escape(result.old)} and {_escape(result.new)} agree "
            "on every call that matters[/bold green]"
        )
    return out.getvalue()


def inventory_dict(result: Inventory) -> dict[str, Any]:
    """The inventory as data: each function name and argument shape, counts and coverage."""
    return {
        "profiles": list(result.profiles),
        **_scan_dict(result.scan),
        "shapes": [
            {
                "name": s.name,
                "shape": list(s.shape),
                "calls": s.calls,
                "sessions": len(s.sessions),
                "known_by": list(s.known_by),
                "covered_by": list(s.covered_by),
            }
            for s in result.shapes
        ],
    }


def inventory_text(result: Inventory, width: int | None = None) -> str:
    """One row per function name and argument shape; a shape no profile covers in red."""
    from rich.table import Table

    console, out = _console(width)
    table = Table("function", "arguments", "calls", "sessions", "covered by")
    for s in result.shapes:
        covered = ", ".join(s.covered_by) or "[red]none[/red]"
        partly = [p for p in s.known_by if p not in s.covered_by]
        if partly:
            covered += f" [dim](refused by {', '.join(partly)})[/dim]"
        table.add_row(
            _escape(s.name),
            _escape(", ".join(s.shape) or "(none)"),
            f"{s.calls:,}",
            f"{len(s.sessions):,}",
            covered,
        )
    console.print(table)
    scan = result.scan
    line = (
        f"{scan.sessions:,} sessions, {scan.calls:,} calls; profiles: {', '.join(result.profiles)}"
    )
    if scan.pruned:
        line += f"; {len(scan.pruned):,} pruned sessions skipped"
    if scan.unreadable:
        line += f"; {len(scan.unreadable):,} unreadable reports skipped"
    console.print(_escape(line))
    return out.getvalue()
