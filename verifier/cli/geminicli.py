"""``verifier gemini-cli``: sessions of gemini-cli, Google's agent loop (docs/gemini-cli.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from verifier.app import geminicli, geminicli_hooks
from verifier.cli.options import config_option, emit, format_option, say
from verifier.formats import render

if TYPE_CHECKING:
    from verifier.config import Config


@click.group("gemini-cli")
def geminicli_group() -> None:
    """Sessions of gemini-cli: recorded by our hooks, or reports from its transcripts."""


@geminicli_group.command("import")
@click.argument("transcript", metavar="TRANSCRIPT", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--repo",
    "repo_path",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The repository the session worked in.",
)
@click.option("--base", metavar="REV", help="The commit the session started from (default: HEAD).")
@click.option(
    "--repo-name",
    metavar="NAME",
    help="The report's repo.name (default: the configured repository of that path, else "
    "the folder's name).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report here (default: stdout).",
)
@config_option
def import_command(
    transcript: Path,
    repo_path: Path,
    base: str | None,
    repo_name: str | None,
    out: Path | None,
    config: Config,
) -> None:
    """Make a session report from a gemini-cli transcript recorded without our hooks.

    The report has no audit trail (audit.trail = "none"): verified, it is
    inconclusive (audit.no_trail) unless the repository sets trail = "optional".
    Exit 0 written, 2 a transcript that cannot be read (the line and field named).
    """
    imported = geminicli.import_transcript(
        config, transcript, repo_path, base=base, repo_name=repo_name
    )
    if out is None:
        emit(imported.raw.decode("utf-8"))
    else:
        geminicli.save(imported, out)
        emit(render.imported_text(imported.report, out))
    for note in imported.notes:
        say(note)


REPO_HELP = "The repository (any folder of its work tree; default: the current folder)."


@geminicli_group.command("install")
@click.option(
    "--repo",
    "repo_path",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    help=REPO_HELP,
)
@click.option(
    "--repo-name",
    metavar="NAME",
    help="The reports' repo.name (default: the configured repository of that path, else "
    "the folder's name).",
)
@click.option(
    "--verify",
    "verify",
    is_flag=True,
    help="Verify each session's report as it ends and show the verdict to the gemini-cli "
    "user (runs the tests; this configuration).",
)
@click.option(
    "--server",
    metavar="URL",
    help="The verifier service: each trail entry goes to its witness as it is written, "
    "and the report is posted at the end (needs --token-env).",
)
@click.option(
    "--token-env",
    metavar="VAR",
    help="The environment variable holding the ingest token when gemini-cli runs (its "
    "name is written, never the token; it must be set now too).",
)
@click.option(
    "--key",
    "signing_key",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Sign each report with this Ed25519 PEM private key (mode 0600).",
)
@click.option(
    "--hmac-env",
    metavar="VAR",
    help="Or sign with HMAC-SHA256, the secret in this environment variable when gemini-cli "
    "runs (its name is written, never the secret; it must be set now too).",
)
@click.option("--key-id", metavar="ID", help="The signature's key_id (default: none).")
@format_option
@config_option
def install_command(
    repo_path: Path,
    repo_name: str | None,
    verify: bool,
    server: str | None,
    token_env: str | None,
    signing_key: Path | None,
    hmac_env: str | None,
    key_id: str | None,
    fmt: str,
    config: Config,
) -> None:
    """Record the repository's gemini-cli sessions: our hooks into its .gemini/settings.json.

    The user's settings and hooks are kept; /.gemini/settings.json goes into
    .git/info/exclude so that it is never the session's change. Each session's
    report, trail and transcript are written under <git-dir>/verifier/<session>/
    (docs/gemini-cli.md). Exit 0 installed, 2 a settings file that cannot be merged
    or an option that cannot work (--token-env naming a variable that is not set).
    """
    if token_env and not os.environ.get(token_env):
        raise click.BadParameter(
            f"${token_env} is not set: set it to an ingest token (verifier token create "
            "--scope ingest --agent gemini-cli) here and where gemini-cli runs",
            param_hint="'--token-env'",
        )
    if hmac_env and not os.environ.get(hmac_env):
        raise click.BadParameter(
            f"${hmac_env} is not set: set it to the agent's HMAC secret ([agents.gemini-cli] "
            "hmac_secret_env on the service) here and where gemini-cli runs",
            param_hint="'--hmac-env'",
        )
    installed = geminicli_hooks.install(
        repo_path,
        config=config,
        repo_name=repo_name,
        verify=geminicli_hooks.verify_command(config.source) if verify else None,
        server=server,
        token_env=token_env,
        signing_key=signing_key,
        hmac_env=hmac_env,
        key_id=key_id,
    )
    emit(render.hooks_json(installed) if fmt == "json" else render.hooks_text(installed))
    for note in geminicli_hooks.install_notes(installed):
        say(note)


@geminicli_group.command("uninstall")
@click.option(
    "--repo",
    "repo_path",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    help=REPO_HELP,
)
@format_option
def uninstall_command(repo_path: Path, fmt: str) -> None:
    """Take our hooks out: .gemini/settings.json and .git/info/exclude as they were before
    install (byte for byte unless changed since; then only our entries and line go).

    The sessions recorded stay under <git-dir>/verifier/. Exit 0 done, 2 not installed.
    """
    removed = geminicli_hooks.uninstall(repo_path)
    emit(render.hooks_json(removed) if fmt == "json" else render.hooks_text(removed))
