"""The `verifier` command line.

Heavy modules (the google-genai SDK, SQLAlchemy) are imported by the commands
that need them, so that `--help` and the commands that do not stay quick.

Exit codes: 0 delivered, 1 not delivered, 2 invalid report or usage error,
3 inconclusive, 4 internal error. Commands turn only `VerifierError` into a
message; anything else is a bug, shown with its traceback by `entry`, which
exits 4 so that a crash is never read as a verdict.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from verifier import __version__, render
from verifier.config import Config, parse_command
from verifier.errors import ConfigError, InfrastructureError, InvalidReport, VerifierError
from verifier.findings import DeliveryStatus, Verification

if TYPE_CHECKING:
    from verifier.store import Store

EXIT = {
    DeliveryStatus.DELIVERED: 0,
    DeliveryStatus.NOT_DELIVERED: 1,
    DeliveryStatus.INCONCLUSIVE: 3,
}

F = TypeVar("F", bound=Callable[..., Any])

format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json prints one object for scripts.",
)
config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Configuration file (default: config/verifier.toml, or $VERIFIER_CONFIG).",
)


@contextmanager
def _errors() -> Iterator[None]:
    """Turn our own errors into a message on stderr and their exit code."""
    try:
        yield
    except VerifierError as exc:
        click.echo(f"verifier: {exc}", err=True)
        sys.exit(exc.exit_code)


def _read(source: str) -> bytes:
    if source == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(source).read_bytes()
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
@config_option
@click.option("--test-command", help="Test command, split like a shell would (never run by one).")
@click.option("--test-timeout", type=click.FloatRange(min=0, min_open=True), help="Seconds.")
@click.option("--no-store", is_flag=True, help="Print the verdict without storing it.")
@format_option
def verify_cmd(
    report: str,
    repo_path: Path | None,
    config_path: Path | None,
    test_command: str | None,
    test_timeout: float | None,
    no_store: bool,
    fmt: str,
) -> None:
    """Verify one session report, print the verdict and store it."""
    from verifier.contract import parse_report
    from verifier.verify import Options, verify

    with _errors():
        config = Config.load(config_path)
        raw = _read(report)
        try:
            parsed = parse_report(raw)
        except InvalidReport:
            _keep_rejected(config, raw, report, no_store)
            raise
        command = (
            parse_command(test_command, "--test-command") if test_command is not None else None
        )
        options = Options(repo_path=repo_path, test_command=command, test_timeout_s=test_timeout)
        err = render.console(stderr=True)
        progress = None if fmt == "json" else (lambda line: err.print(f"[dim]… {line}[/dim]"))
        # Ingest first: a session id stored with other bytes is refused before any work.
        note = None if no_store else _store(config, lambda store: store.ingest(parsed))
        verification = verify(parsed, config, options, progress)
        if not no_store and note is None:
            note = _store(config, lambda store: store.record_run(verification))
        _print_verification(
            verification, fmt, note or ("not stored (--no-store)" if no_store else None)
        )
        code = EXIT[verification.delivery_status]
        sys.exit(3 if note and note.startswith("not stored") and code == 0 else code)


def _store(config: Config, action: Callable[[Store], object]) -> str | None:
    """Run `action` on the store: None when done, a note when the store cannot be used.

    A database we cannot reach does not stop the verification (the verdict is
    printed, and a delivered one becomes inconclusive); a conflicting session id
    does, as `SessionConflict`.
    """
    from verifier.store import Store

    try:
        with Store.open(config.database_url) as store:
            result = action(store)
    except InfrastructureError as exc:
        return f"not stored: {exc}"
    return f"stored as run {result}" if isinstance(result, int) else None


def _keep_rejected(config: Config, raw: bytes, source: str, no_store: bool) -> None:
    """Keep the bytes of a report we could not read, so nothing is lost."""
    if no_store:
        return
    exc = sys.exc_info()[1]
    assert isinstance(exc, InvalidReport)
    from verifier.store import Store

    try:
        with Store.open(config.database_url) as store:
            store.reject(raw, source=source, field=exc.field, problem=exc.problem)
    except VerifierError:
        pass  # the report error is the one to show


def _print_verification(verification: Verification, fmt: str, stored_note: str | None) -> None:
    if fmt == "json":
        data = verification.to_dict()
        if stored_note is not None:
            data["stored"] = stored_note
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        render.verification(render.console(), verification, stored_note)


@main.command("ingest")
@click.argument("reports", nargs=-1, required=True, metavar="REPORT...")
@config_option
@format_option
def ingest_cmd(reports: tuple[str, ...], config_path: Path | None, fmt: str) -> None:
    """Store session reports without verifying them."""
    from verifier.store import Store

    with _errors():
        config = Config.load(config_path)
        rows: list[dict[str, str]] = []
        err = render.console(stderr=True)
        with Store.open(config.database_url) as store:
            for n, source in enumerate(reports, 1):
                rows.append(_ingest_one(store, source))
                if fmt == "text" and len(reports) > 1:
                    err.print(f"[dim]… {n}/{len(reports)} {rows[-1]['result']}: {source}[/dim]")
        if fmt == "json":
            click.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        else:
            render.ingest_table(render.console(), rows)
        sys.exit(2 if any(r["result"] in ("invalid", "conflict") for r in rows) else 0)


def _ingest_one(store: Store, source: str) -> dict[str, str]:
    from verifier.contract import parse_report

    try:
        raw = _read(source)
    except ConfigError as exc:
        return {"report": source, "result": "invalid", "session_id": "", "message": str(exc)}
    try:
        parsed = parse_report(raw)
    except InvalidReport as exc:
        store.reject(raw, source=source, field=exc.field, problem=exc.problem)
        return {"report": source, "result": "invalid", "session_id": "", "message": str(exc)}
    try:
        _row, created = store.ingest(parsed)
    except VerifierError as exc:
        return {
            "report": source,
            "result": "conflict",
            "session_id": parsed.session_id,
            "message": str(exc),
        }
    result = "stored" if created else "already stored"
    return {"report": source, "result": result, "session_id": parsed.session_id, "message": ""}


@main.command("show", short_help="A stored session with its runs and latest findings.")
@click.argument("session_id")
@config_option
@format_option
def show_cmd(session_id: str, config_path: Path | None, fmt: str) -> None:
    """Show a stored session, its verification runs and the latest findings."""
    from verifier.store import Store

    with _errors():
        config = Config.load(config_path)
        with Store.open(config.database_url) as store:
            session = store.get_session(session_id)
            runs = store.runs(session_id)
        if fmt == "json":
            click.echo(json.dumps(render.session_dict(session, runs), ensure_ascii=False, indent=2))
        else:
            render.session(render.console(), session, runs)


@main.command("list", short_help="Stored sessions, latest verdicts, done and delivered rates.")
@config_option
@format_option
def list_cmd(config_path: Path | None, fmt: str) -> None:
    """List stored sessions with their latest verdict, and the done and delivered rates."""
    from verifier.store import Store

    with _errors():
        config = Config.load(config_path)
        with Store.open(config.database_url) as store:
            rows = store.latest_runs()
            rates = store.rates()
        if fmt == "json":
            click.echo(json.dumps(render.listing_dict(rows, rates), ensure_ascii=False, indent=2))
        else:
            render.listing(render.console(), rows, rates)


def entry() -> None:
    """The console script: `main`, with a crash exiting 4 rather than Python's 1."""
    try:
        main()
    except Exception:
        traceback.print_exc()
        click.echo("verifier: internal error (a bug): no verdict was reached", err=True)
        sys.exit(4)


@main.group("db")
def db_group() -> None:
    """Database administration."""


@db_group.command("upgrade")
@config_option
def db_upgrade_cmd(config_path: Path | None) -> None:
    """Migrate the database to the latest schema."""
    from verifier.store import upgrade

    with _errors():
        config = Config.load(config_path)
        upgrade(config.database_url)
        click.echo("database is at the latest revision")


@main.command("demo", short_help="Sample sessions on a sample repository: done versus delivered.")
@click.option(
    "--dir",
    "workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("demo-out"),
    show_default=True,
    help="Where the sample repository and reports are written.",
)
@format_option
def demo_cmd(workdir: Path, fmt: str) -> None:
    """Build a sample repository and sessions, verify them, and compare done with delivered."""
    from verifier import demo

    with _errors():
        demo.run(workdir, fmt)


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
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json prints one object for scripts.",
)
def report_check_cmd(report: str, explain: bool, profile_dir: Path | None, fmt: str) -> None:
    """Check a report offline: contract, audit chain, completeness, effects against claims.

    Exit 0 valid with no finding, 1 findings, 2 not a valid report.
    """
    from verifier import reportcheck, resources

    try:
        raw = sys.stdin.buffer.read() if report == "-" else Path(report).read_bytes()
    except OSError as exc:
        click.echo(f"verifier: cannot read report {report!r}: {exc.strerror}", err=True)
        sys.exit(2)
    try:
        result = reportcheck.check_report(raw, profile_dir or resources.profiles_dir())
    except VerifierError as exc:
        click.echo(f"verifier: {exc}", err=True)
        sys.exit(exc.exit_code)
    to_text = reportcheck.render_json if fmt == "json" else reportcheck.render_text
    click.echo(to_text(result, explain=explain), nl=False)
    sys.exit(result.exit_code)
