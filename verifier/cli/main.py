"""The `verifier` command line: a face of `verifier.app.pipeline`, nothing more.

Heavy modules (the google-genai SDK, SQLAlchemy, rich) are imported by the
commands that need them, so that `--help` and the commands that do not stay
quick.

Exit codes: 0 delivered, 1 not delivered, 2 invalid report or usage error,
3 inconclusive, 4 internal error, 130 and 143 interrupted by SIGINT and
SIGTERM. `entry` is the one place errors are caught: our own (`VerifierError`)
become a message and their code; anything else is a bug, shown with its
traceback, exit 4, so that a crash is never read as a verdict.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from verifier import __version__
from verifier.cli.common import (
    _actor,
    _emit,
    _stdout_gone,
    config_option,
    format_option,
    moment,
)
from verifier.config import Config, parse_command
from verifier.errors import ConfigError, Interrupted, InvalidReport, NotFound, VerifierError
from verifier.formats import render
from verifier.moments import parse_moment, utc_text
from verifier.store.tokens import SCOPES

if TYPE_CHECKING:
    from datetime import datetime

    from verifier.app.pipeline import Oversized
    from verifier.store import Store
    from verifier.store.tokens import TokenRow


class _Exit(Exception):
    """The exit code a command chose once its output is written."""

    def __init__(self, code: int) -> None:
        self.code = code


def _read(source: str, limit: int) -> bytes | Oversized:
    """The report's bytes, streamed: one over `limit` bytes is never held whole."""
    from verifier.app.pipeline import read_report

    if source == "-":
        return read_report(sys.stdin.buffer, limit)
    try:
        with Path(source).open("rb") as stream:
            return read_report(stream, limit)
    except OSError as exc:
        raise ConfigError(f"cannot read report {source!r}: {exc.strerror}") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="verifier")
def main() -> None:
    """Verify that coding-agent sessions delivered what they claim."""


@main.command("verify")
@click.argument("report", metavar="REPORT|-")
@click.option(
    "--repo",
    "repo_path",
    type=click.Path(file_okay=False, path_type=Path),
    help="The repository (default: the configured path of repo.name).",
)
@click.option(
    "--repo-name",
    metavar="NAME",
    help="The configured repository whose policy applies (default: repo.name).",
)
@config_option
@click.option("--test-command", help="Test command, split like a shell would (never run by one).")
@click.option("--test-timeout", type=click.FloatRange(min=0, min_open=True), help="Seconds.")
@click.option("--no-store", is_flag=True, help="Print the verdict without storing it.")
@format_option
def verify_cmd(
    report: str,
    repo_path: Path | None,
    repo_name: str | None,
    config_path: Path | None,
    test_command: str | None,
    test_timeout: float | None,
    no_store: bool,
    fmt: str,
) -> None:
    """Verify one session report, print the verdict and store it."""
    from verifier.app.pipeline import verify_report
    from verifier.verify import Options

    config = Config.load(config_path)
    raw = _read(report, config.max_report_bytes)
    command = parse_command(test_command, "--test-command") if test_command is not None else None
    options = Options(
        repo_path=repo_path,
        repo_name=repo_name,
        test_command=command,
        test_timeout_s=test_timeout,
    )
    progress = None if fmt == "json" else render.progress_printer()
    outcome = verify_report(
        raw, config, options, store=not no_store, source=report, progress=progress
    )
    if fmt == "json":
        _emit(render.verification_json(outcome.verification, outcome.stored))
    else:
        _emit(render.verification_text(outcome.verification, outcome.stored))
    raise _Exit(outcome.exit_code)


@main.command("ingest")
@click.argument("reports", nargs=-1, required=True, metavar="REPORT...")
@config_option
@format_option
def ingest_cmd(reports: tuple[str, ...], config_path: Path | None, fmt: str) -> None:
    """Store session reports without verifying them."""
    from verifier.store import Store

    config = Config.load(config_path)
    rows: list[dict[str, str]] = []
    with Store.open(config.database_url) as store:
        for n, source in enumerate(reports, 1):
            rows.append(_ingest_one(store, source, config))
            if fmt == "text" and len(reports) > 1:
                click.echo(f"… {n}/{len(reports)} {rows[-1]['result']}: {source}", err=True)
    _emit(render.ingest_json(rows) if fmt == "json" else render.ingest_text(rows))
    raise _Exit(2 if any(r["result"] in ("invalid", "conflict") for r in rows) else 0)


def _ingest_one(store: Store, source: str, config: Config) -> dict[str, str]:
    from verifier.app.pipeline import submit

    limit = config.max_report_bytes
    row = {"report": source, "result": "", "session_id": "", "message": ""}
    try:
        session, created = submit(
            store, _read(source, limit), source, max_report_bytes=limit, config=config
        )
    except (ConfigError, InvalidReport) as exc:
        return {**row, "result": "invalid", "message": str(exc)}
    except VerifierError as exc:
        session_id = getattr(exc, "session_id", "")
        return {**row, "result": "conflict", "session_id": session_id, "message": str(exc)}
    result = "stored" if created else "already stored"
    return {**row, "result": result, "session_id": session.session_id}


@main.command("show", short_help="A stored session with its runs and latest findings.")
@click.argument("session_id")
@config_option
@format_option
def show_cmd(session_id: str, config_path: Path | None, fmt: str) -> None:
    """Show a stored session, its verification runs and the latest findings."""
    from verifier.store import NoStore, Store
    from verifier.store.overrides import overrides as store_overrides

    config = Config.load(config_path)
    try:
        with Store.open(config.database_url, read_only=True) as store:
            session = store.get_session(session_id)
            runs = store.runs(session_id)
            overrides = store_overrides(store, session_id)
    except NoStore as exc:
        raise NotFound(f"session {session_id!r} is not stored: {exc}") from None
    if fmt == "json":
        _emit(render.dumps(render.session_dict(session, runs, overrides)))
    else:
        _emit(render.session_text(session, runs, overrides=overrides))


@main.command("list", short_help="Stored sessions, verdicts, done and delivered rates.")
@config_option
@format_option
def list_cmd(config_path: Path | None, fmt: str) -> None:
    """List stored sessions with their verdict, and the done and delivered rates."""
    from verifier.store import Counts, NoStore, Store
    from verifier.store.overrides import overridden_count

    config = Config.load(config_path)
    try:
        with Store.open(config.database_url, read_only=True) as store:
            rows = store.sessions()
            rates = store.rates()
            overridden = overridden_count(store)
    except NoStore as exc:
        click.echo(f"verifier: {exc}", err=True)
        rows, rates, overridden = [], Counts(), 0
    if fmt == "json":
        _emit(render.dumps(render.listing_dict(rows, rates, overridden)))
    else:
        _emit(render.listing_text(rows, rates, overridden=overridden))


@main.group("config")
def config_group() -> None:
    """The configuration in force."""


@config_group.command("show")
@config_option
@format_option
def config_show_cmd(config_path: Path | None, fmt: str) -> None:
    """Which file was read, and the effective settings (secrets masked)."""
    from verifier.config import config_candidates

    config = Config.load(config_path)
    data: dict[str, Any] = {
        "file": None if config.source is None else str(config.source),
        "searched": [str(p) for p in config_candidates(os.environ)],
        "settings": config.settings(),
    }
    if fmt == "json":
        _emit(render.dumps(data))
        return
    read = data["file"] or "none (the packaged defaults apply)"
    lines = [f"file: {read}"]
    if config.source is None and config_path is None:
        lines.append("searched: " + ", ".join(data["searched"]))
    lines.append(render.toml_like(data["settings"]))
    _emit("\n".join(lines) + "\n")


@main.group("db")
def db_group() -> None:
    """Database administration."""


@db_group.command("upgrade")
@config_option
def db_upgrade_cmd(config_path: Path | None) -> None:
    """Migrate the database to the latest schema."""
    from verifier.store import upgrade

    config = Config.load(config_path)
    upgrade(config.database_url)
    _emit("database is at the latest revision\n")


@db_group.command("copy", short_help="Copy the embedded store to an empty PostgreSQL database.")
@click.option(
    "--to",
    "target",
    required=True,
    metavar="URL",
    envvar="VERIFIER_COPY_TO",
    help="The PostgreSQL database, empty (also $VERIFIER_COPY_TO, to keep a password "
    "out of the process list).",
)
@config_option
@format_option
def db_copy_cmd(target: str, config_path: Path | None, fmt: str) -> None:
    """Copy the configured SQLite store into an empty PostgreSQL database, migrated first.

    The copy is checked before it is committed: row counts and a SHA-256 of every
    table on both sides, and each report against its report_sha256. Progress goes
    to stderr.
    """
    from verifier.store.maintenance import copy_store

    config = Config.load(config_path)
    result = copy_store(config.database_url, target, progress=render.progress_printer())
    if fmt == "json":
        _emit(render.dumps(result.to_dict()))
        return
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
    _emit("\n".join(lines) + "\n")


@main.command("prune", short_help="Drop old report bytes and test logs; verdicts stay.")
@click.option(
    "--before",
    required=True,
    metavar="DATE",
    help="Sessions that ended before this date (YYYY-MM-DD, midnight UTC, or an ISO datetime).",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@config_option
@format_option
def prune_cmd(before: str, yes: bool, config_path: Path | None, fmt: str) -> None:
    """Drop the report bytes and test logs of sessions that ended before DATE (admin).

    Verdicts, findings, check statuses and every hash are kept; a pruned session
    can never be verified again. Sessions never verified keep their report.
    Export the evidence you must keep first.
    """
    import getpass
    from datetime import UTC, datetime

    from verifier.store import Store
    from verifier.store.maintenance import parse_cutoff, plan_prune, prune

    cutoff = parse_cutoff(before, datetime.now(UTC))
    config = Config.load(config_path)
    click.echo(
        "verifier: pruning drops report bytes and test logs for good; export the evidence "
        "you must keep before pruning",
        err=True,
    )
    with Store.open(config.database_url) as store:
        plan = plan_prune(store, cutoff)
        click.echo(
            f"verifier: {plan.sessions:,} sessions ended before {before} "
            f"({plan.report_bytes:,} report bytes, {plan.runs:,} runs); "
            f"{plan.kept_unverified:,} never verified are kept",
            err=True,
        )
        if not yes:
            try:
                confirmed = click.confirm("Prune them?", err=True)
            except click.exceptions.Abort:
                raise ConfigError("--yes: no answer to the confirmation; pass --yes") from None
            if not confirmed:
                click.echo("verifier: nothing was pruned", err=True)
                raise _Exit(1)
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = str(os.getuid())
        result = prune(store, cutoff, actor=f"cli:{user}", progress=render.progress_printer())
    if fmt == "json":
        _emit(render.dumps(result.to_dict()))
        return
    _emit(
        f"pruned {result.sessions:,} sessions ended before {before}: "
        f"{result.report_bytes:,} report bytes and {result.log_bytes:,} bytes of test logs "
        f"from {result.runs:,} runs ({result.bytes_freed:,} bytes in all); verdicts, findings "
        f"and hashes are kept (admin log entry {result.admin_log_id})\n"
    )


@main.command("serve", short_help="The HTTP API, verifying in the background.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option(
    "--no-worker",
    is_flag=True,
    help="Serve the API only; `verifier worker` processes verify (PostgreSQL).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    help="Verifications at once in this process (default: service.concurrency).",
)
@config_option
def serve_cmd(
    host: str, port: int, no_worker: bool, concurrency: int | None, config_path: Path | None
) -> None:
    """Serve the API; verify posted sessions in this process unless --no-worker.

    Stops on SIGTERM or SIGINT within 15 s: test runs killed, nothing recorded for
    them, their sessions left to verify again.
    """
    from verifier.service.serve import serve

    raise _Exit(
        serve(
            Config.load(config_path),
            host=host,
            port=port,
            worker=not no_worker,
            concurrency=concurrency,
        )
    )


@main.command("worker", short_help="Run verification jobs from the PostgreSQL queue.")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    help="Verifications at once in this process (default: service.concurrency).",
)
@config_option
def worker_cmd(concurrency: int | None, config_path: Path | None) -> None:
    """Verify queued sessions until stopped (PostgreSQL; on SQLite, `serve` verifies).

    Stops on SIGTERM or SIGINT within 15 s: test runs killed, their jobs released
    for another worker.
    """
    from verifier.service.serve import run_worker

    raise _Exit(run_worker(Config.load(config_path), concurrency))


@main.group("token")
def token_group() -> None:
    """API tokens: create, list, revoke (each act goes into the admin log)."""


def _expiry(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    """--expires: a moment (a date: the token expires as that day begins, UTC), not past."""
    from datetime import UTC
    from datetime import datetime as now

    when = moment(ctx, param, value)
    if when is not None and when <= now.now(UTC):
        raise click.BadParameter(f"{value!r} is in the past")
    return when


def _token_dict(token: TokenRow) -> dict[str, Any]:
    from datetime import UTC
    from datetime import datetime as moment

    return {
        "id": token.id,
        "name": token.name,
        "scope": token.scope,
        "state": token.state(moment.now(UTC)),
        "created_at": utc_text(token.created_at),
        "created_by": token.created_by,
        "expires_at": utc_text(token.expires_at),
        "revoked_at": utc_text(token.revoked_at),
        "agent": token.agent,
    }


@token_group.command("create")
@click.option(
    "--scope",
    required=True,
    type=click.Choice(SCOPES),
    help="ingest posts reports; read reads sessions, stats and /metrics; admin does all.",
)
@click.option("--name", required=True, help="Who or what holds it (shown in the admin log).")
@click.option(
    "--expires", metavar="DATE", callback=_expiry, help="Expiry: 2027-01-31 or an ISO time."
)
@click.option(
    "--agent", metavar="NAME", help="Bind an ingest token to one agent: it posts only its reports."
)
@config_option
@format_option
def token_create_cmd(
    scope: str,
    name: str,
    expires: datetime | None,
    agent: str | None,
    config_path: Path | None,
    fmt: str,
) -> None:
    """Create a token and print it, once: only its hash is stored."""
    from verifier.store import Store
    from verifier.store.tokens import create_token

    config = Config.load(config_path)
    with Store.open(config.database_url) as store:
        token, secret = create_token(
            store, name=name, scope=scope, actor=_actor(), expires_at=expires, agent=agent
        )
    if fmt == "json":
        _emit(render.dumps({"token": secret, **_token_dict(token)}))
        return
    expiry = "never expires" if expires is None else f"expires {_token_dict(token)['expires_at']}"
    click.echo(
        f"token {token.id} {token.name!r} (scope {token.scope}, {expiry}); "
        "it is shown this once, keep it now:",
        err=True,
    )
    _emit(secret + "\n")


@token_group.command("list")
@config_option
@format_option
def token_list_cmd(config_path: Path | None, fmt: str) -> None:
    """Every token: scope, state, who created it; never the secret."""
    from verifier.store import Store
    from verifier.store.tokens import list_tokens

    config = Config.load(config_path)
    with Store.open(config.database_url) as store:
        rows = [_token_dict(t) for t in list_tokens(store)]
    if fmt == "json":
        _emit(render.dumps({"tokens": rows}))
        return
    lines = [f"{'id':>4}  {'scope':<7} {'state':<8} {'expires':<21} created by  name"]
    lines += [
        f"{r['id']:>4}  {r['scope']:<7} {r['state']:<8} {r['expires_at'] or '-':<21} "
        f"{r['created_by']}  {r['name']}"
        for r in rows
    ]
    _emit("\n".join(lines) + "\n")


@token_group.command("revoke")
@click.argument("token_id", metavar="ID", type=int)
@config_option
@format_option
def token_revoke_cmd(token_id: int, config_path: Path | None, fmt: str) -> None:
    """Revoke a token: requests with it are refused (401) from now on."""
    from verifier.store import Store
    from verifier.store.tokens import revoke_token

    config = Config.load(config_path)
    with Store.open(config.database_url) as store:
        token, changed = revoke_token(store, token_id, actor=_actor())
    data = {**_token_dict(token), "revoked_now": changed}
    if fmt == "json":
        _emit(render.dumps(data))
    elif changed:
        _emit(f"token {token.id} {token.name!r} revoked\n")
    else:
        _emit(f"token {token.id} {token.name!r} was already revoked at {data['revoked_at']}\n")


@main.command("demo", short_help="Sample sessions on a sample repository: done versus delivered.")
@click.option(
    "--dir",
    "workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("demo-out"),
    show_default=True,
    help="Where the sample repository, reports and store are written (a folder the demo made).",
)
@click.option(
    "--live",
    is_flag=True,
    help="The scenarios' tasks done by the real Gemini API (GEMINI_API_KEY, GEMINI_MODEL).",
)
@format_option
def demo_cmd(workdir: Path, live: bool, fmt: str) -> None:
    """Build a sample repository and sessions, verify them, and compare done with delivered."""
    from verifier.agent.model import gemini_from_env
    from verifier.demo import run as demo

    demo.run(workdir, fmt, gemini_from_env() if live else None)


@main.group("report")
def report_group() -> None:
    """Session reports, checked offline."""


@report_group.command("check")
@click.argument("report", metavar="REPORT|-")
@click.option(
    "--explain", is_flag=True, help="Show the canonical bytes behind each hash that does not match."
)
@click.option(
    "--profile-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Tool profiles (default: the packaged ones).",
)
@format_option
def report_check_cmd(report: str, explain: bool, profile_dir: Path | None, fmt: str) -> None:
    """Check a report offline: contract, audit chain, completeness, effects against claims.

    Exit 0 valid with no finding, 1 findings, 2 not a valid report.
    """
    from verifier import resources
    from verifier.app import reportcheck
    from verifier.app.pipeline import Oversized
    from verifier.config import DEFAULT_MAX_REPORT_BYTES

    raw = _read(report, DEFAULT_MAX_REPORT_BYTES)
    if isinstance(raw, Oversized):
        raise raw.error()
    result = reportcheck.check_report(raw, profile_dir or resources.profiles_dir())
    to_text = reportcheck.render_json if fmt == "json" else reportcheck.render_text
    _emit(to_text(result, explain=explain))
    raise _Exit(result.exit_code)


@main.group("adapters")
def adapters_group() -> None:
    """Tool profiles against the stored sessions: shadow mode and the migration inventory."""


@adapters_group.command("shadow", short_help="Run two tool profiles over stored sessions.")
@click.option("--old", "old", required=True, metavar="PROFILE", help="The profile in use.")
@click.option("--new", "new", required=True, metavar="PROFILE", help="The profile to switch to.")
@click.option(
    "--session", "session_ids", multiple=True, metavar="ID", help="Only this session (repeatable)."
)
@click.option(
    "--since",
    metavar="DATE",
    help="Only sessions that ended at or after DATE (YYYY-MM-DD, or an ISO datetime).",
)
@format_option
@config_option
def adapters_shadow_cmd(
    old: str,
    new: str,
    session_ids: tuple[str, ...],
    since: str | None,
    fmt: str,
    config_path: Path | None,
) -> None:
    """Normalise every stored call with both profiles, executing nothing, and list each
    difference: unrecognised names, missing or extra fields, values, permissions, actions.

    Exit 0 when the profiles agree on everything that matters, 1 when they do not.
    """
    from verifier.app import adapters
    from verifier.store import NoStore, Store

    if session_ids and since is not None:
        raise click.UsageError("give --session or --since, not both")
    cutoff = parse_moment(since, "--since") if since is not None else None
    config = Config.load(config_path)
    try:
        with Store.open(config.database_url, read_only=True) as store:
            result = adapters.shadow(store, config.profiles_dir, old, new, session_ids, cutoff)
    except NoStore as exc:
        if session_ids:
            raise NotFound(f"session {session_ids[0]!r} is not stored: {exc}") from None
        click.echo(f"verifier: {exc}", err=True)
        result = adapters.shadow(None, config.profiles_dir, old, new)
    _emit(render.dumps(render.shadow_dict(result)) if fmt == "json" else render.shadow_text(result))
    raise _Exit(result.exit_code)


@adapters_group.command("inventory", short_help="Function names and argument shapes stored.")
@format_option
@config_option
def adapters_inventory_cmd(fmt: str, config_path: Path | None) -> None:
    """Every function name and argument shape seen in the stored sessions, with counts,
    and which tool profiles cover each."""
    from verifier.app import adapters
    from verifier.store import NoStore, Store

    config = Config.load(config_path)
    try:
        with Store.open(config.database_url, read_only=True) as store:
            result = adapters.inventory(store, config.profiles_dir)
    except NoStore as exc:
        click.echo(f"verifier: {exc}", err=True)
        result = adapters.inventory(None, config.profiles_dir)
    _emit(
        render.dumps(render.inventory_dict(result))
        if fmt == "json"
        else render.inventory_text(result)
    )


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    """First signal: unwind, killing the test run and removing our folders. Second: stop now,
    the test runs killed all the same (our temporary folders are left)."""
    if getattr(_on_signal, "seen", False):
        from verifier._internal.sandbox.runner import kill_all

        kill_all()
        os._exit(128 + signum)
    _on_signal.seen = signum  # type: ignore[attr-defined]
    raise Interrupted(signum)


def run(argv: list[str] | None = None) -> int:
    """Run the command line and return its exit code; errors are caught here and only here."""
    try:
        main.main(args=argv, prog_name="verifier", standalone_mode=False)
        return 0
    except _Exit as exc:
        return exc.code
    except Interrupted as exc:
        return _interrupted(exc.signum)
    except VerifierError as exc:
        click.echo(f"verifier: {exc}", err=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return 2  # a usage error, whatever click's own code: 1 would read as "not delivered"
    except click.exceptions.Abort:
        return 130
    except BrokenPipeError:
        _stdout_gone()
        return 0
    except Exception:
        signum = getattr(_on_signal, "seen", False)
        if signum:  # the signal's exception, wrapped by code it interrupted (an import, say)
            return _interrupted(signum)
        traceback.print_exc()
        click.echo("verifier: internal error (a bug): no verdict was reached", err=True)
        return 4


def _interrupted(signum: int) -> int:
    name = signal.Signals(signum).name
    click.echo(f"verifier: interrupted by {name}: no verdict was recorded", err=True)
    return 128 + signum


def entry() -> None:
    """The console script: signals handled, output flushed, then exit without teardown."""
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    code = run()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_gone()
    sys.stderr.flush()
    # Everything is closed and written: skip the interpreter's teardown of the SDK's modules.
    os._exit(code)


# Commands kept in modules of their own, registered last: they use this module's helpers.
from verifier.cli.evidence import evidence_group, keys_group  # noqa: E402
from verifier.cli.gate import gate_cmd  # noqa: E402
from verifier.cli.ops import register as _register_ops  # noqa: E402
from verifier.cli.trail import register as _register_trail  # noqa: E402

main.add_command(gate_cmd)
main.add_command(evidence_group)
main.add_command(keys_group)
_register_trail(main)
_register_ops(main)
