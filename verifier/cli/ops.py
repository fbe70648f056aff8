"""Operations commands: `override`, `export sessions`, `webhooks log|retry`.

Registered on the `verifier` group at the end of `verifier.cli.main` (`register`);
like every command there, a face of the store and the pipeline, nothing more.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from verifier.cli.common import _actor, _emit, config_option, format_option, moment
from verifier.config import Config
from verifier.formats import render

if TYPE_CHECKING:
    from verifier.store import Store


def register(main: click.Group) -> None:
    """Add this module's commands to `main`."""
    main.add_command(override_cmd)
    main.add_command(export_group)
    main.add_command(webhooks_group)


# -- override -------------------------------------------------------------------------


@click.command("override", short_help="Record a person's verdict beside the computed one.")
@click.argument("session_id")
@click.option(
    "--status",
    required=True,
    type=click.Choice(["delivered", "not_delivered", "cleared"]),
    help="cleared withdraws the standing override.",
)
@click.option("--reason", required=True, help="Why: kept with the override, and in the admin log.")
@config_option
@format_option
def override_cmd(
    session_id: str, status: str, reason: str, config_path: Path | None, fmt: str
) -> None:
    """Override SESSION_ID's verdict. The computed verdict, its runs and the stats are
    unchanged: both verdicts are shown and exported; a merge gate uses the override."""
    from verifier.store import Store
    from verifier.store.overrides import record_override

    config = Config.load(config_path)
    with Store.open(config.database_url) as store:
        row = record_override(store, session_id, status=status, reason=reason, author=_actor())
        listed = store.listed(session_id)
    data = {
        "override": row.to_dict(),
        "session_id": session_id,
        "delivery_status": listed.delivery_status,
        "override_status": listed.session.override_status,
        "effective_status": listed.effective_status,
    }
    if fmt == "json":
        _emit(render.dumps(data))
        return
    standing = (
        "no override stands"
        if listed.session.override_status is None
        else f"override {listed.session.override_status.replace('_', ' ')}"
    )
    _emit(
        f"session {session_id}: computed verdict {listed.delivery_status.replace('_', ' ')}; "
        f"{standing} (override {row.id} by {row.author})\n"
    )


# -- export ---------------------------------------------------------------------------


@click.group("export")
def export_group() -> None:
    """Stored data for other tools."""


@export_group.command("sessions", short_help="Every matching session as CSV or JSON lines.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "jsonl"]),
    default="csv",
    show_default=True,
    help="csv (cells a spreadsheet would run as formulas start with ') or jsonl.",
)
@click.option("--agent", help="Sessions of this agent.")
@click.option("--model", help="Sessions of this model.")
@click.option("--repo", help="Sessions of this repository.")
@click.option("--agent-status", help="The agent's canonical status (done, error, ...).")
@click.option("--done/--not-done", default=None, help="Sessions the agent called done, or not.")
@click.option(
    "--delivery-status",
    type=click.Choice(["pending", "delivered", "not_delivered", "inconclusive"]),
    help="The computed verdict.",
)
@click.option(
    "--head-commit",
    "head_commits",
    multiple=True,
    help="A head commit (repeat for any of several).",
)
@click.option("--branch", help="Sessions on this branch.")
@click.option(
    "--from", "ended_from", callback=moment, help="Ended at or after: a date or an ISO time."
)
@click.option("--to", "ended_to", callback=moment, help="Ended before: a date or an ISO time.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to FILE (complete or not at all) instead of stdout.",
)
@config_option
def export_sessions_cmd(
    fmt: str,
    agent: str | None,
    model: str | None,
    repo: str | None,
    agent_status: str | None,
    done: bool | None,
    delivery_status: str | None,
    head_commits: tuple[str, ...],
    branch: str | None,
    ended_from: datetime | None,
    ended_to: datetime | None,
    out: Path | None,
    config_path: Path | None,
) -> None:
    """Every session the filters keep (the filters of GET /v1/sessions), newest ended
    first, one row each, written as it is read: no page limit, never all rows in memory.
    Both verdicts are columns: the computed delivery_status, override_status and
    effective_status."""
    from verifier.app import export
    from verifier.store import NoStore, SessionFilter, Store

    filters = SessionFilter(
        agent=agent,
        model=model,
        repo=repo,
        agent_status=agent_status,
        done=done,
        delivery_status=delivery_status,
        head_commits=head_commits or None,
        branch=branch,
        ended_from=ended_from,
        ended_to=ended_to,
    )
    config = Config.load(config_path)
    try:
        store: Store | None = Store.open(config.database_url, read_only=True)
    except NoStore as exc:
        click.echo(f"verifier: {exc}", err=True)
        store = None
    try:
        lines = (
            export.lines(store, filters, fmt)
            if store is not None
            else iter(export.csv_lines([]) if fmt == "csv" else [])
        )
        if out is None:
            _write(lines, sys.stdout)
        else:
            _write_file(lines, out)
    finally:
        if store is not None:
            store.close()


_FLUSH_EVERY = 500


def _write(lines: Any, stream: IO[str]) -> None:
    for n, line in enumerate(lines, 1):
        stream.write(line)
        if n % _FLUSH_EVERY == 0:
            stream.flush()
    stream.flush()


def _write_file(lines: Any, out: Path) -> None:
    """Write beside `out`, then rename: a failed export leaves no half file behind."""
    partial = out.with_name(out.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8", newline="") as stream:
            _write(lines, stream)
        os.replace(partial, out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


# -- webhooks -------------------------------------------------------------------------


@click.group("webhooks")
def webhooks_group() -> None:
    """Webhook notifications: the delivery log, and due deliveries attempted now."""


@webhooks_group.command("log", short_help="The webhook deliveries, newest first.")
@click.option(
    "--state", type=click.Choice(["pending", "delivered", "failed"]), help="Only this state."
)
@click.option("--session", "session_id", help="Only this session's deliveries.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
@config_option
@format_option
def webhooks_log_cmd(
    state: str | None, session_id: str | None, limit: int, config_path: Path | None, fmt: str
) -> None:
    """Each delivery: webhook, event, session, state, attempts, the last answer or error."""
    from verifier.store import NoStore, Store
    from verifier.store.webhooks import deliveries

    config = Config.load(config_path)
    try:
        with Store.open(config.database_url, read_only=True) as store:
            rows = deliveries(store, state=state, session_id=session_id, limit=limit)
    except NoStore as exc:
        click.echo(f"verifier: {exc}", err=True)
        rows = []
    if fmt == "json":
        _emit(
            render.dumps(
                {"deliveries": [{**r.to_dict(), "body": r.body.decode("utf-8")} for r in rows]}
            )
        )
        return
    lines = [
        f"{'id':>5}  {'state':<9} {'tries':>5}  {'event':<14} {'webhook':<12} {'session':<24} last"
    ]
    for r in rows:
        d = r.to_dict()
        last = r.last_error or (f"HTTP {r.last_status}" if r.last_status else "-")
        if r.state == "pending" and d["next_attempt_at"]:
            last += f"; next {d['next_attempt_at']}"
        lines.append(
            f"{r.id:>5}  {r.state:<9} {r.attempts:>5}  {r.event:<14} {r.webhook:<12} "
            f"{r.session_id:<24} {last}"
        )
    if not rows:
        lines.append("(no deliveries)")
    _emit("\n".join(lines) + "\n")


@webhooks_group.command("retry", short_help="Attempt the due webhook deliveries now.")
@config_option
@format_option
def webhooks_retry_cmd(config_path: Path | None, fmt: str) -> None:
    """Attempt every pending delivery whose next attempt is due (what the service's
    periodic work does each round)."""
    from verifier.app.notify import retry_due
    from verifier.store import Store

    config = Config.load(config_path)
    with Store.open(config.database_url) as store:
        counts = retry_due(store, config)
    if fmt == "json":
        _emit(render.dumps(counts))
        return
    _emit(
        f"{counts['webhooks_delivered']} delivered, {counts['webhooks_pending']} to retry, "
        f"{counts['webhooks_failed']} failed\n"
    )
