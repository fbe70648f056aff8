"""The `verifier` command line: a face of `verifier.app`, nothing more.

This module holds the root group, the registry of commands, and the edge: `entry`
(the console script) and `run`. Each command group lives in a module of its own
(`verifier.cli.sessions`, `.tokens`, `.db`, ...), imported only when one of its
commands runs: `COMMANDS` names each module with the line ``verifier --help``
shows, so that ``--help`` imports none of them.

Exit codes: 0 delivered, 1 not delivered, 2 invalid report or usage error,
3 inconclusive, 4 internal error, 130 and 143 interrupted by SIGINT and
SIGTERM. `run` is the one place errors are caught: our own (`VerifierError`, and
audit's `AuditError`) become a message with their code and the exit code of
their class; anything else is a bug, shown with its traceback, exit 4, so that a
crash is never read as a verdict.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import traceback
from types import FrameType
from typing import Any, NamedTuple

import click

from audit.errors import AuditError
from verifier import __version__
from verifier.app import stop_all
from verifier.cli.options import Invocation, stdout_gone
from verifier.controls import escape_controls
from verifier.errors import ConfigError, Interrupted, InvalidReport, VerifierError
from verifier.formats import render

# The exit code of an error of `audit`, which knows no command line: one to fix, as ours.
AUDIT_EXIT_CODE = 2
# Codes that add nothing to a message: the roots, and a configuration or usage mistake
# (the message names the setting or the option).
GENERIC_CODES = frozenset((VerifierError.code, AuditError.code, ConfigError.code))


class CommandInfo(NamedTuple):
    """Where a command lives, and the line ``verifier --help`` shows for it."""

    module: str
    attribute: str
    summary: str
    # True when `summary` is the first sentence of the command's help, which click
    # shortens to the terminal's width; False when it is a short help given as is.
    shortened: bool = False

    def short_help(self, limit: int) -> str:
        """The summary as click lists the command itself, in `limit` columns."""
        if self.shortened:
            return click.Command(None, help=self.summary).get_short_help_str(limit)
        return click.Command(None, short_help=self.summary).get_short_help_str(limit)


COMMANDS: dict[str, CommandInfo] = {
    "adapters": CommandInfo(
        "verifier.cli.adapters",
        "adapters_group",
        "Tool profiles against the stored sessions: shadow mode and the migration inventory.",
        shortened=True,
    ),
    "config": CommandInfo(
        "verifier.cli.config", "config_group", "The configuration in force.", shortened=True
    ),
    "db": CommandInfo("verifier.cli.db", "db_group", "Database administration.", shortened=True),
    "demo": CommandInfo(
        "verifier.cli.demo",
        "demo_command",
        "Sample sessions on a sample repository: done versus delivered.",
    ),
    "evidence": CommandInfo(
        "verifier.cli.evidence",
        "evidence_group",
        "Signed evidence bundles an auditor verifies offline (docs/evidence.md).",
        shortened=True,
    ),
    "export": CommandInfo(
        "verifier.cli.export", "export_group", "Stored data for other tools.", shortened=True
    ),
    "gemini-cli": CommandInfo(
        "verifier.cli.geminicli",
        "geminicli_group",
        "Sessions of gemini-cli: recorded by our hooks, or reports from its transcripts.",
        shortened=True,
    ),
    "gate": CommandInfo(
        "verifier.cli.gate",
        "gate_command",
        "May this be merged? Exit 0 when every selected session is delivered.",
    ),
    "ingest": CommandInfo(
        "verifier.cli.sessions",
        "ingest_command",
        "Store session reports without verifying them.",
        shortened=True,
    ),
    "keys": CommandInfo(
        "verifier.cli.evidence",
        "keys_group",
        "The Ed25519 key that signs evidence bundles ([evidence] signing_key).",
        shortened=True,
    ),
    "list": CommandInfo(
        "verifier.cli.sessions",
        "list_command",
        "Stored sessions, verdicts, done and delivered rates.",
    ),
    "override": CommandInfo(
        "verifier.cli.sessions",
        "override_command",
        "Record a person's verdict beside the computed one.",
    ),
    "prune": CommandInfo(
        "verifier.cli.db",
        "prune_command",
        "Drop old report bytes and test logs; verdicts stay.",
    ),
    "report": CommandInfo(
        "verifier.cli.report",
        "report_group",
        "Session reports, checked offline.",
        shortened=True,
    ),
    "serve": CommandInfo(
        "verifier.cli.service", "serve_command", "The HTTP API, verifying in the background."
    ),
    "show": CommandInfo(
        "verifier.cli.sessions",
        "show_command",
        "A stored session with its runs and latest findings.",
    ),
    "task": CommandInfo(
        "verifier.cli.tasks",
        "task_group",
        "Tasks and their acceptance tests: add, list, show (docs/tasks.md).",
        shortened=True,
    ),
    "token": CommandInfo(
        "verifier.cli.tokens",
        "token_group",
        "API tokens: create, list, revoke (each act goes into the admin log).",
        shortened=True,
    ),
    "trail": CommandInfo(
        "verifier.cli.trail",
        "trail_group",
        "Audit trails (JSONL, as a recorder writes them), checked on their own.",
        shortened=True,
    ),
    "verify": CommandInfo(
        "verifier.cli.verify",
        "verify_command",
        "Verify one session report, print the verdict and store it; or, with --batch, many "
        "(the first session of each base first, so each base is tested once), and print one "
        "summary: resolved (delivered) or not, per session and per task.",
        shortened=True,
    ),
    "webhooks": CommandInfo(
        "verifier.cli.webhooks",
        "webhooks_group",
        "Webhook notifications: the delivery log, and due deliveries attempted now.",
        shortened=True,
    ),
    "worker": CommandInfo(
        "verifier.cli.service",
        "worker_command",
        "Run verification jobs from the PostgreSQL queue.",
    ),
}


def load_command(name: str) -> click.Command:
    """The command registered as `name`, its module imported now."""
    info = COMMANDS[name]
    command = getattr(importlib.import_module(info.module), info.attribute)
    assert isinstance(command, click.Command), info
    return command


class LazyGroup(click.Group):
    """The root group: its commands come from `COMMANDS`, each imported when it runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load_command(cmd_name) if cmd_name in COMMANDS else None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:
            # click suggests names from the commands it holds: here, the registry's.
            raise click.exceptions.NoSuchCommand(
                exc.command_name, possibilities=list(COMMANDS), ctx=ctx
            ) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their summaries, as click lists them, read from `COMMANDS`."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [(name, info.short_help(limit)) for name, info in sorted(COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="verifier")
def main() -> None:
    """Verify that coding-agent sessions delivered what they claim."""


def run(argv: list[str] | None = None) -> int:
    """Run the command line and return its exit code; errors are caught here and only here."""
    invocation = Invocation()
    try:
        code: Any = main.main(
            args=argv, prog_name="verifier", standalone_mode=False, obj=invocation
        )
        return code if isinstance(code, int) else 0
    except Interrupted as exc:
        return _interrupted(exc.signum)
    except (VerifierError, AuditError) as exc:
        if signum := getattr(_on_signal, "seen", False):  # the cancel a signal made
            return _interrupted(signum)
        _show_error(exc, invocation.format)
        return exc.exit_code if isinstance(exc, VerifierError) else AUDIT_EXIT_CODE
    except click.ClickException as exc:
        exc.show()
        return 2  # a usage error, whatever click's own code: 1 would read as "not delivered"
    except click.exceptions.Abort:
        return 130
    except BrokenPipeError:
        stdout_gone()
        return 0
    except Exception:
        signum = getattr(_on_signal, "seen", False)
        if signum:  # the signal's exception, wrapped by code it interrupted (an import, say)
            return _interrupted(signum)
        traceback.print_exc()
        click.echo("verifier: internal error (a bug): no verdict was reached", err=True)
        return 4


def error_text(exc: VerifierError | AuditError) -> str:
    """How an error reads on stderr: its message, and its code when that adds to it (the
    code is not one of `GENERIC_CODES`, and the message does not already say it):
    ``verifier: session 's1' is not stored [not_found]``."""
    if isinstance(exc, InvalidReport) and exc.count > 1:
        # Every problem on a line of its own, each escaped alone.
        return "verifier: " + render.inert(render.invalid_report_text(exc, "not a report v1"))
    # A problem may quote what a report holds: shown as the faces show agent text.
    message, code = render.inert(escape_controls(str(exc))), exc.code
    if code in GENERIC_CODES or code.replace("_", " ") in message.lower():
        return f"verifier: {message}\n"
    return f"verifier: {message} [{code}]\n"


def error_json(exc: VerifierError | AuditError) -> str:
    """An error under ``--format json``: the API's error object, with the same keys beside
    ``error`` (an invalid report's ``problems``)."""
    field = getattr(exc, "field", None)
    problem = getattr(exc, "problem", None) if field is not None else None
    extra: dict[str, Any] = {}
    if isinstance(exc, VerifierError):
        extra = exc.extra()
        problem = exc.problem_text() if field is not None else None
    return render.dumps(
        {
            "error": {
                "code": exc.code,
                "field": field,
                "problem": problem if isinstance(problem, str) else str(exc),
            },
            **extra,
        }
    )


def _show_error(exc: VerifierError | AuditError, fmt: str) -> None:
    """The error as text on stderr; under ``--format json`` also its object on stdout, the
    one document a script reads there, whatever happened."""
    if fmt == "json":
        click.echo(error_json(exc), nl=False)
    click.echo(error_text(exc), err=True, nl=False)


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    """First signal: unwind, killing the test run and removing our folders. Second: stop now,
    the test runs killed all the same (our temporary folders are left).

    The first signal cancels every verification of the process before it raises: the
    exception lands wherever the main thread is, and Python swallows one raised inside a
    finalizer or a weakref callback; the cancel stops the test run all the same, and its
    `Cancelled` unwinds to `run`, which reads it as the signal's."""
    if getattr(_on_signal, "seen", False):
        # The one import of plumbing in a face, made here: a run that is never signalled
        # twice never loads the sandbox for it.
        from verifier._internal.sandbox.runner import kill_all

        kill_all()
        os._exit(128 + signum)
    _on_signal.seen = signum  # type: ignore[attr-defined]
    stop_all()
    raise Interrupted(signum)


def _interrupted(signum: int) -> int:
    name = signal.Signals(signum).name
    click.echo(f"verifier: interrupted by {name}: no verdict was recorded", err=True)
    return 128 + signum


def _unraisable(unraisable: Any) -> None:
    """A signal's exception that Python swallowed (raised in a finalizer or a weakref
    callback) is not an error to print: the cancel it made stops the work all the same
    (`_on_signal`). Anything else is printed as Python would."""
    if isinstance(unraisable.exc_value, Interrupted):
        return
    sys.__unraisablehook__(unraisable)


def entry() -> None:
    """The console script: signals handled, output flushed, then exit without teardown."""
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    sys.unraisablehook = _unraisable
    code = run()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_gone()
    sys.stderr.flush()
    # Everything is closed and written: skip the interpreter's teardown of the SDK's modules.
    os._exit(code)


__all__ = ["COMMANDS", "CommandInfo", "entry", "main", "run"]
