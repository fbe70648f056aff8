"""Text and JSON views of verifications and stored sessions: pure functions to strings.

Every view takes data and returns the text to write, with no I/O, so one
verdict renders the same in every face and each format is tested alone. The
text views use rich, imported only when text is asked for; JSON needs nothing.
A check's details are read defensively: any check, status or finding renders,
whatever it put in its details.

What an agent wrote (ids, paths, messages, branch and agent names, models) is
shown with its control characters escaped (`verifier.controls.escape_controls`),
and every text view is `inert`: no line of it starts a GitHub workflow command,
so a CI log that shows it runs none an agent wrote.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from verifier.controls import escape_controls
from verifier.errors import InvalidReport
from verifier.findings import CheckResult, CheckStatus, DeliveryStatus, Finding, Verification
from verifier.moments import utc_text

if TYPE_CHECKING:  # the store loads SQLAlchemy, rich costs an import: neither is needed for JSON
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table

    from audit.bundle import Verified
    from audit.trailfile import TrailCheck
    from verifier.app.adapters import Inventory, Scan, Shadow
    from verifier.app.batch import Batch
    from verifier.app.evidence import Written
    from verifier.app.geminicli_hooks import Installed
    from verifier.app.reportcheck import HashExplanation, ReportCheck
    from verifier.app.sessions import Ingestion, Listing, Overridden, SessionView
    from verifier.app.settings import Settings
    from verifier.app.tasks import TaskView
    from verifier.app.tokens import Created, Revoked, TokenView
    from verifier.contract.profiles import Action
    from verifier.contract.report import Report
    from verifier.store import Counts
    from verifier.store.maintenance import CopyResult, PrunePlan, PruneResult
    from verifier.store.webhooks import DeliveryRow

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


# GitHub's runner reads a workflow command from a line starting with `::` (after white
# space) and, in its legacy form, from `##[` anywhere in a line.
_COMMAND_START = re.compile(r"^([^\S\r\n]*)::", re.M)


def inert(text: str) -> str:
    """`text` with nothing a GitHub runner reads as a workflow command: a line that would
    start one gets a backslash before its `::`, and `##[` its bracket escaped."""
    return _COMMAND_START.sub(r"\1\\::", text).replace("##[", "##\\[")


def inert_json(text: str) -> str:
    """JSON text as `inert`, losing nothing: non-ASCII and control characters are JSON
    escapes (no line ends inside a string, none starts with `::`), and the `#` of `##[`
    is ``\\u0023``, which every JSON reader reads back as `#`."""
    return text.replace("##[", "#\\u0023[")


def dumps(data: Any) -> str:
    return inert_json(json.dumps(data, ensure_ascii=True, indent=2)) + "\n"


class _Output(io.StringIO):
    """What a console writes into, read back `inert`."""

    def getvalue(self) -> str:
        return inert(super().getvalue())


def progress_line(line: str) -> str:
    """A line of progress on long work, as the faces show it (on stderr)."""
    return f"… {line}"


def _console(width: int | None = None) -> tuple[Console, io.StringIO]:
    """A console writing into a string; colours when stdout is a terminal, 120 columns
    for pipes and CI logs rather than 80."""
    from rich.console import Console

    out = _Output()
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
    """Text for a console: its control characters escaped, then its markup."""
    from rich.markup import escape

    return escape(escape_controls(text))


def verdict_text(status: str) -> str:
    style = VERDICT_STYLE.get(status, "dim")
    return f"[{style}]{status.replace('_', ' ')}[/{style}]"


def finding_short(finding: Finding) -> str:
    """The code and where: what fits in a table cell."""
    return f"{finding.code} {finding.path}" if finding.path else finding.code


def finding_message(finding: Finding) -> str:
    """The message to show beside the finding's path: without the path it starts with
    (``calc.py: is not at head``, as the checks write them), so the path is said once."""
    message = finding.message
    if finding.path and message.startswith(f"{finding.path}: "):
        return message[len(finding.path) + 2 :]
    return message


def finding_text(finding: Finding) -> str:
    """Code, path and message on one line, the path said once."""
    where = f" {finding.path}" if finding.path else ""
    return f"{finding.code}{where}: {finding_message(finding)}"


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
        classified = classification_line(result.details)
        if classified:
            console.print(f"    {esc(classified)}")
        for note in result.notes:
            console.print(f"    [dim]note: {esc(note)}[/dim]")
        excerpt = result.details.get("output_excerpt")
        if result.status is CheckStatus.FAIL and isinstance(excerpt, str):
            for line in excerpt.rstrip().splitlines()[-6:]:
                console.print(f"      [dim]| {esc(line.expandtabs())}[/dim]")
    for note in v.notes:
        console.print(f"  [dim]note: {esc(note)}[/dim]")
    if stored:
        console.print(f"  [dim]{esc(stored)}[/dim]")
    return out.getvalue()


CLASSIFIED = (
    ("fixed", "fixed"),
    ("broken", "broken"),
    ("still_failing", "still failing"),
    ("still_passing", "still passing"),
    ("new", "new"),
    ("removed", "removed"),
)


def classification_line(details: Mapping[str, Any]) -> str:
    """What the change did to the tests, from a tests check's details (a differential run):
    ``classified: fixed 1, broken 0, still failing 1, ...``; empty without one."""
    found = details.get("classification")
    counts = found.get("counts") if isinstance(found, Mapping) else None
    if not isinstance(counts, Mapping):
        return ""
    return "classified: " + ", ".join(f"{label} {counts.get(k, 0)}" for k, label in CLASSIFIED)


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


def session_json(view: SessionView) -> str:
    """``show --format json``: the session whole (`SessionView.to_dict`)."""
    return dumps(view.to_dict())


def session_text(view: SessionView, width: int | None = None) -> str:
    """A stored session, a table of its runs, the verdict with its findings, and the
    overrides beside it."""
    from rich.table import Table

    console, out = _console(width)
    esc = _escape
    session, runs = view.session, view.runs
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
        _overrides_text(console, view)
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
    console.print(f"  verdict: {verdict_text(view.delivery_status)}")
    if view.trail_note:
        console.print(f"  note: {_escape(view.trail_note)}")
    shown = view.shown_run
    checks = shown.result.get("checks") if shown is not None else None
    tests = checks.get("tests") if isinstance(checks, Mapping) else None
    details = tests.get("details") if isinstance(tests, Mapping) else None
    classified = classification_line(details) if isinstance(details, Mapping) else ""
    if classified:
        console.print(f"  tests {esc(classified)}")
    for finding in () if shown is None else shown.findings:
        console.print(f"  - [bold]{esc(finding.code)}[/bold] {esc(finding.message)}")
    _overrides_text(console, view)
    return out.getvalue()


def _overrides_text(console: Console, view: SessionView) -> None:
    """The override standing beside the computed verdict, and every override made."""
    if view.session.override_status is not None:
        console.print(
            f"  override: {verdict_text(view.session.override_status)} "
            "(a person's verdict; the computed one above stands beside it)"
        )
    for o in view.overrides:
        console.print(
            f"  - {utc_text(o.at)} {_escape(o.author)}: {o.status.replace('_', ' ')}: "
            f"{_escape(o.reason)}"
        )


def listing_json(listing: Listing) -> str:
    """``list --format json``: each session's line (`SessionView.summary_dict`), the rates."""
    return dumps(listing.to_dict())


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


def listing_text(listing: Listing, width: int | None = None) -> str:
    """A table of the sessions, then the rates and what they count."""
    console, out = _console(width)
    table = sessions_table()
    for view in listing.sessions:
        session = view.session
        cells = list(
            session_row(
                session.session_id,
                session.raw_status,
                session.done,
                view.delivery_status,
                view.first_finding,
            )
        )
        latest, verdict_run = view.latest_run, view.verdict_run
        if latest is not None and verdict_run is not None and latest.id != verdict_run.id:
            cells[3] += f" [dim](latest run {latest.delivery_status.value.replace('_', ' ')})[/dim]"
        if view.trail_note:
            cells[3] += " [dim](no audit trail)[/dim]"
        if session.override_status is not None:
            cells[3] += f" [bold]overridden: {session.override_status.replace('_', ' ')}[/bold]"
        table.add_row(*cells)
    console.print(table)
    console.print(rates_line(listing.rates))
    console.print(overridden_line(listing.overridden))
    return out.getvalue()


def ingest_json(ingestion: Ingestion) -> str:
    return dumps([row.to_dict() for row in ingestion.reports])


def ingest_text(ingestion: Ingestion, width: int | None = None) -> str:
    from rich.table import Table

    console, out = _console(width)
    table = Table("report", "result", "session", "message")
    table.columns[0].overflow = "fold"
    for row in ingestion.reports:
        table.add_row(
            _escape(row.report),
            row.result,
            _escape(row.session_id),
            _escape(row.message),
        )
    console.print(table)
    return out.getvalue()


def override_text(done: Overridden) -> str:
    """The computed verdict, unchanged, and the override that now stands (or none)."""
    view, row = done.session, done.override
    standing = view.session.override_status
    said = "no override stands" if standing is None else f"override {standing.replace('_', ' ')}"
    return inert(
        f"session {view.session.session_id}: computed verdict "
        f"{view.delivery_status.replace('_', ' ')}; {said} "
        f"(override {row.id} by {escape_controls(row.author)})\n"
    )


def toml_like(settings: Mapping[str, Any]) -> str:
    """Settings as TOML-looking lines, for reading (not for parsing)."""
    lines = ["[verifier]"]
    repos = settings.get("repositories") or {}
    lines += [f"{k} = {json.dumps(v)}" for k, v in settings.items() if k != "repositories"]
    for name, table in repos.items():
        lines += ["", f"[repositories.{name}]"]
        lines += [f"{k} = {json.dumps(v)}" for k, v in table.items() if k != "name"]
    return "\n".join(lines)


def settings_text(shown: Settings) -> str:
    """``config show``: the file read (or that none was, and where one was looked for),
    then the settings as TOML-looking lines."""
    lines = [f"file: {shown.file or 'none (the packaged defaults apply)'}"]
    if shown.file is None:
        lines.append("searched: " + ", ".join(str(p) for p in shown.searched))
    lines.append(toml_like(shown.settings))
    return "\n".join(lines) + "\n"


# -- administration: the database, tokens, webhooks ------------------------------------------


def copy_text(result: CopyResult) -> str:
    """``db copy``: every table copied with its rows and hash, and what was verified."""
    lines = [f"copied {result.source} to {result.target} in {result.seconds:.1f}s"]
    lines += [f"  {t.table:<20} {t.rows:>10,} rows  sha256 {t.sha256}" for t in result.tables]
    lines.append(
        "verified: row counts and SHA-256 of every table match, and "
        f"{result.reports_checked:,} reports match their report_sha256 "
        f"({result.reports_pruned:,} pruned)"
    )
    if result.pending:
        lines.append(f"{result.pending:,} sessions are not verified yet")
    lines.append("point database_url at the new database to use it")
    return "\n".join(lines) + "\n"


PRUNE_WARNING = (
    "pruning drops report bytes and test logs for good; export the evidence "
    "you must keep before pruning"
)


def prune_plan_text(plan: PrunePlan, before: str) -> str:
    """What ``prune`` is about to drop, asked before it does (`before` as it was given)."""
    return (
        f"{plan.sessions:,} sessions ended before {before} "
        f"({plan.report_bytes:,} report bytes, {plan.runs:,} runs); "
        f"{plan.kept_unverified:,} never verified are kept"
    )


def prune_text(result: PruneResult, before: str) -> str:
    """What ``prune`` dropped, and what it kept."""
    return (
        f"pruned {result.sessions:,} sessions ended before {before}: "
        f"{result.report_bytes:,} report bytes and {result.log_bytes:,} bytes of test logs "
        f"from {result.runs:,} runs ({result.bytes_freed:,} bytes in all); verdicts, findings "
        f"and hashes are kept (admin log entry {result.admin_log_id})\n"
    )


def token_created_json(created: Created) -> str:
    return dumps({"token": created.secret, **created.view.to_dict()})


def token_created_note(created: Created) -> str:
    """What goes beside a new token's secret (on stderr: the secret alone on stdout)."""
    token = created.view.token
    expires = created.view.to_dict()["expires_at"]
    expiry = "never expires" if expires is None else f"expires {expires}"
    return (
        f"token {token.id} {token.name!r} (scope {token.scope}, {expiry}); "
        "it is shown this once, keep it now:"
    )


def tokens_json(views: Sequence[TokenView]) -> str:
    return dumps({"tokens": [view.to_dict() for view in views]})


def tokens_text(views: Sequence[TokenView]) -> str:
    """One line per token: id, scope, state, expiry, who created it, its name."""
    rows = [view.to_dict() for view in views]
    lines = [f"{'id':>4}  {'scope':<7} {'state':<8} {'expires':<21} created by  name"]
    lines += [
        f"{r['id']:>4}  {r['scope']:<7} {r['state']:<8} {r['expires_at'] or '-':<21} "
        f"{r['created_by']}  {r['name']}"
        for r in rows
    ]
    return "\n".join(lines) + "\n"


def revoked_json(revoked: Revoked) -> str:
    return dumps({**revoked.view.to_dict(), "revoked_now": revoked.now})


def revoked_text(revoked: Revoked) -> str:
    token = revoked.view.token
    if revoked.now:
        return f"token {token.id} {token.name!r} revoked\n"
    when = revoked.view.to_dict()["revoked_at"]
    return f"token {token.id} {token.name!r} was already revoked at {when}\n"


def deliveries_json(rows: Sequence[DeliveryRow]) -> str:
    """The delivery log, each delivery with the body it sends."""
    return dumps({"deliveries": [{**r.to_dict(), "body": r.body.decode("utf-8")} for r in rows]})


def deliveries_text(rows: Sequence[DeliveryRow]) -> str:
    """One line per delivery: its state, attempts, event, webhook, session, last answer."""
    lines = [
        f"{'id':>5}  {'state':<9} {'tries':>5}  {'event':<14} {'webhook':<12} {'session':<24} last"
    ]
    for r in rows:
        d = r.to_dict()
        last = escape_controls(r.last_error or (f"HTTP {r.last_status}" if r.last_status else "-"))
        if r.state == "pending" and d["next_attempt_at"]:
            last += f"; next {d['next_attempt_at']}"
        lines.append(
            f"{r.id:>5}  {r.state:<9} {r.attempts:>5}  {r.event:<14} {r.webhook:<12} "
            f"{r.session_id:<24} {last}"
        )
    if not rows:
        lines.append("(no deliveries)")
    return inert("\n".join(lines) + "\n")


def retried_text(counts: Mapping[str, int]) -> str:
    return (
        f"{counts['webhooks_delivered']} delivered, {counts['webhooks_pending']} to retry, "
        f"{counts['webhooks_failed']} failed\n"
    )


# -- trails and evidence, checked offline ---------------------------------------------------


def trail_json(path: Path, result: TrailCheck) -> str:
    return dumps({"trail": str(path), **result.as_dict()})


def trail_text(path: Path, result: TrailCheck) -> str:
    """Intact and complete, intact but unfinished (and why), or where it broke."""
    count = result.count
    entries = f"{count} intact entr{'y' if count == 1 else 'ies'}"
    if result.status == "intact":
        return f"{path}: intact and complete, {entries}\n"
    problem = escape_controls(str(result.problem))
    if result.status == "unfinished":
        return inert(f"{path}: intact but unfinished, {entries}: {problem}\n")
    return inert(f"{path}: broken at line {result.line}: {problem}; {entries} before it\n")


def imported_text(report: Report, out: Path) -> str:
    """``gemini-cli import``: where the report went and what it says, without a trail."""
    doc = report.doc
    changes = len(doc.changes)
    return inert(
        f"wrote {out}: session {doc.session_id}, status {escape_controls(doc.status)}, "
        f"{changes} claimed change{'' if changes == 1 else 's'}, tool profile "
        f"{escape_controls(str(doc.agent.tool_profile))}, no audit trail\n"
    )


def hooks_text(done: Installed) -> str:
    """``gemini-cli install`` / ``uninstall``: what happened to each file."""
    lines = [
        f"{done.settings}: {done.settings_action}",
        f"{done.exclude}: {done.exclude_action}",
    ]
    if done.repo_name is not None:
        lines.append(
            f"sessions will be recorded under {done.reports}/<session>/ "
            f"(report.json, repo.name {done.repo_name!r})"
        )
    if done.server is not None:
        lines.append(
            f"trail entries witnessed and reports posted by {done.server} "
            f"(the ingest token from ${done.token_env} when gemini-cli runs)"
        )
    if done.signing_key is not None:
        lines.append(f"reports signed with {done.signing_key}")
    if done.hmac_env is not None:
        lines.append(f"reports signed with HMAC-SHA256, the secret from ${done.hmac_env}")
    return inert("\n".join(lines) + "\n")


def hooks_json(done: Installed) -> str:
    """The same as JSON."""
    return dumps(done.as_dict())


def written_text(written: Written) -> str:
    """``evidence export``: where the bundle went, what it holds, which key signed it."""
    return (
        f"wrote {written.out}: {len(written.session_ids)} session(s), {written.files} files, "
        f"{written.size} bytes\n"
        f"signed by key {written.key_fingerprint}\n"
    )


def bundle_refused_json(reason: str, message: str) -> str:
    return dumps({"ok": False, "reason": reason, "message": message})


def bundle_refused_text(reason: str, message: str) -> str:
    return inert(f"reason: {escape_controls(reason)}\n{escape_controls(message)}\n")


def bundle_text(verified: Verified) -> str:
    """``evidence verify``: the sessions of a bundle that verified, each with its verdict."""
    lines = [f"verified: {len(verified.sessions)} session(s), {verified.files} files"]
    lines.append(f"signed by key {verified.key_fingerprint}")
    for s in verified.sessions:
        verdict = s["verdict"] or {}
        report = "report included" if s["report_included"] else "report pruned"
        lines.append(
            escape_controls(
                f"  {s['session_id']}: {verdict.get('computed')} "
                f"(effective {verdict.get('effective')}), {s['subjects']} file(s), {report}"
            )
        )
    return inert("\n".join(lines) + "\n")


def key_json(path: Path, fingerprint: str) -> str:
    return dumps({"path": str(path), "fingerprint": fingerprint})


def key_text(path: Path, fingerprint: str) -> str:
    return f"wrote {path}\nfingerprint {fingerprint}\n"


# -- the demo -------------------------------------------------------------------------------


def demo_text(
    verifications: Sequence[Verification],
    rates: Mapping[str, Any],
    *,
    store: str,
    example: str,
    page: str,
    browse: Sequence[str],
) -> str:
    """``verifier demo``: each session's verdict beside what the agent said, the two rates,
    and what to try next (`example` verifies one report again, `browse` serves the store)."""
    console, out = _console()
    table = sessions_table()
    for v in verifications:
        table.add_row(
            *session_row(
                v.session_id, v.agent_status, v.done, v.delivery_status.value, v.first_finding
            )
        )
    console.print(table)
    console.print(
        f"done rate      [bold]{rates['done_rate']:.0%}[/bold] "
        f"({rates['done']} of {rates['sessions']})"
    )
    console.print(
        f"delivered rate [bold]{rates['delivered_rate']:.0%}[/bold] "
        f"({rates['delivered']} of {rates['sessions']})"
    )
    console.print(f"[dim]stored in {store}; try: {example}[/dim]", soft_wrap=True)
    console.print(f"the same view as a page: {page}", soft_wrap=True)
    console.print(
        "browse it live: " + "\n                ".join(browse), soft_wrap=True, highlight=False
    )
    return out.getvalue()


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


# -- report check: a report offline ----------------------------------------------------------


def report_check_text(check: ReportCheck, *, explain: bool = False) -> str:
    """What a harness author reads: each finding with its code, where, expected and found."""
    shown = escape_controls
    if check.invalid is not None:
        return inert(invalid_report_text(check.invalid, "the bytes are not a session report v1"))
    lines = [
        f"report {shown(str(check.session_id))}: "
        + (
            "valid, no finding"
            if not check.findings
            else f"{len(check.findings)} finding{'s' if len(check.findings) > 1 else ''}"
        )
        + f" (profile {check.profile}, {check.entries} audit entries, {check.calls} calls)"
    ]
    for finding in check.findings:
        lines.append(f"{finding.code}: {shown(finding.message)}")
        where = check.where(finding)
        if where is not None:
            lines.append(f"  where:    {shown(where)}")
        if finding.expected is not None:
            lines.append(f"  expected: {shown(finding.expected)}")
        if finding.found is not None:
            lines.append(f"  found:    {shown(finding.found)}")
    if check.unknown_calls:
        lines.append(
            f"note: calls the profile {shown(repr(check.profile))} does not know (kept raw, "
            "not normalised): " + ", ".join(shown(name) for name in check.unknown_calls)
        )
    if explain:
        for e in check.explanations:
            lines.extend(_explain_lines(e))
        if not check.explanations:
            lines.append("explain: no hash to explain")
    elif check.explanations:
        lines.append("(--explain shows the canonical bytes behind each hash that does not match)")
    return inert("\n".join(lines) + "\n")


def invalid_report_text(invalid: InvalidReport, headline: str) -> str:
    """An invalid report for people: each problem listed, its field and what is wrong,
    then how many more were found and not listed. Each line is escaped on its own (a
    field or a problem may quote what the report holds)."""
    shown = escape_controls
    if invalid.count == 1:
        return (
            f"invalid report: {headline}\n"
            f"  field:   {shown(invalid.field)}\n"
            f"  problem: {shown(invalid.problem)}\n"
        )
    lines = [f"invalid report: {headline}; {invalid.count} problems:"]
    lines += [f"  {shown(field)}: {shown(problem)}" for field, problem in invalid.problems]
    if invalid.more:
        lines.append(
            f"  … and {invalid.more} more problem{'s' if invalid.more > 1 else ''} not listed "
            "(fix these first)"
        )
    return "\n".join(lines) + "\n"


def invalid_report_dict(invalid: InvalidReport) -> dict[str, Any]:
    """The problems of an invalid report, as `report check --format json` and the API's
    error give them: the first as ``field`` and ``problem``, all in ``problems``."""
    return {
        "field": invalid.field,
        "problem": invalid.problem,
        "problems": [{"field": f, "problem": p} for f, p in invalid.problems],
        "more_problems": invalid.more,
    }


def _explain_lines(e: HashExplanation) -> list[str]:
    seq = json.dumps(e.seq)
    if e.kind == "entry":
        head = (
            f"explain audit.entries[{e.index}] (seq {seq}): hashed "
            '"audit-entry/v1", one NUL byte, then these RFC 8785 bytes (the entry without "hash"):'
        )
    else:
        what = "args" if e.kind == "args" else "response"
        head = (
            f"explain audit.entries[{e.index}] (seq {seq}) {e.kind}_sha256: the RFC 8785 bytes "
            f"of the {what} of call {e.call_id}:"
        )
    return [
        head,
        escape_controls(e.canonical.decode("utf-8")),
        f"  computed: {e.computed}",
        f"  stated:   {e.stated}",
    ]


def report_check_json(check: ReportCheck, *, explain: bool = False) -> str:
    """One JSON object for scripts; ``explanations`` only with `explain`."""
    data: dict[str, Any]
    if check.invalid is not None:
        data = {"valid": False, **invalid_report_dict(check.invalid), "findings": []}
    else:
        data = {
            "valid": True,
            "session_id": check.session_id,
            "profile": check.profile,
            "entries": check.entries,
            "calls": check.calls,
            "findings": [check.finding_dict(f) for f in check.findings],
            "unknown_calls": list(check.unknown_calls),
        }
        if explain:
            data["explanations"] = [e.to_dict() for e in check.explanations]
    data["exit_code"] = check.exit_code
    return dumps(data)


def task_json(view: TaskView, *, added: bool | None = None) -> str:
    """One task as data; `added`: whether `verifier task add` changed the store."""
    data = view.to_dict()
    return dumps(data if added is None else {**data, "changed": added})


def tasks_json(views: Sequence[TaskView]) -> str:
    return dumps({"tasks": [view.to_dict() for view in views]})


def task_text(view: TaskView, *, added: bool | None = None) -> str:
    """A task's tests, one per line, and where it was declared."""
    data = view.to_dict()
    task_id = escape_controls(str(data["task_id"]))
    lines = []
    if added is not None:
        lines.append(f"task {task_id} {'stored' if added else 'already stored as given'}")
    lines += [
        f"task        {task_id}",
        f"repository  {escape_controls(data['repository'] or 'any')}",
        f"read-only   {'yes' if data['read_only'] else 'no'}",
        f"declared    {_declared(data)}",
        f"acceptance  {len(data['fail_to_pass'])} (fail at the base, pass at the head)",
        *(f"  {escape_controls(t)}" for t in data["fail_to_pass"]),
        f"must keep   {len(data['pass_to_pass'])} (pass at the base and at the head)",
        *(f"  {escape_controls(t)}" for t in data["pass_to_pass"]),
    ]
    return inert("\n".join(lines) + "\n")


def tasks_text(views: Sequence[TaskView]) -> str:
    """One line per task: id, repository, its counts of tests, where it was declared."""
    if not views:
        return "no tasks declared (tasks file or `verifier task add`)\n"
    lines = [f"{'task':<24} {'repository':<16} {'accept':>6} {'keep':>5} {'ro':<3} declared"]
    for view in views:
        data = view.to_dict()
        lines.append(
            f"{escape_controls(str(data['task_id'])):<24} "
            f"{escape_controls(data['repository'] or 'any'):<16} "
            f"{len(data['fail_to_pass']):>6} {len(data['pass_to_pass']):>5} "
            f"{'yes' if data['read_only'] else 'no':<3} {_declared(data)}"
        )
    return inert("\n".join(lines) + "\n")


def _declared(data: Mapping[str, Any]) -> str:
    if data["source"] == "file":
        return f"tasks file {escape_controls(str(data['path']))}"
    return f"store, {data['added_at']} by {escape_controls(str(data['added_by']))}"


def batch_json(batch: Batch) -> str:
    """A batch's summary and every session's outcome, in the order of the file."""
    return dumps(batch.to_dict())


def batch_text(batch: Batch) -> str:
    """One line per session (its verdict, task, first finding or why it was refused), the
    classification of its tests when the tests check made one, then the totals."""
    data = batch.to_dict()
    lines = []
    for result in data["results"]:
        name = escape_controls(str(result["session_id"] or result["source"]))
        task = escape_controls(str(result["task_id"] or "-"))
        if result["status"] == "refused":
            error = result["error"]
            why = f"{error['code']}: {escape_controls(str(error['problem']))}"
        else:
            first = result["first_finding"]
            why = (
                ""
                if first is None
                else escape_controls(f"{first['code']} {first.get('path') or ''}")
            )
        lines.append(f"{result['status']:<13} {name:<28} task {task:<20} {why}".rstrip())
        classified = classification_line({"classification": result.get("classification")})
        if classified:
            lines.append(f"{'':<13} {classified}")
    judged = data["sessions"] - data["refused"]
    rate = "-" if data["resolved_rate"] is None else f"{data['resolved_rate']:.0%}"
    lines.append(
        f"resolved {data['resolved']} of {judged} judged ({rate}); unresolved "
        f"{data['unresolved']}, inconclusive {data['inconclusive']}, refused {data['refused']}"
    )
    per_task = [
        f"{escape_controls(k)} {v['resolved']}/{v['sessions']}"
        for k, v in data["tasks"].items()
        if k
    ]
    if per_task:
        lines.append("per task: " + ", ".join(per_task))
    lines.append(
        f"{data['sessions']} sessions on {data['bases']} bases, {data['jobs']} at a time, "
        f"{data['seconds']:.1f} s"
    )
    return inert("\n".join(lines) + "\n")
