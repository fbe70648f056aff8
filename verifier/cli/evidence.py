"""Evidence bundles: ``verifier evidence export|verify`` and ``verifier keys create``.

The export reads the store (`verifier.app.evidence`); the verification needs the
audit package alone, offline (`audit.bundle`).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from verifier.app import evidence
from verifier.cli.options import config_option, emit, exit_with, format_option, given_moment
from verifier.formats import render

if TYPE_CHECKING:
    from verifier.config import Config


@click.group("evidence")
def evidence_group() -> None:
    """Signed evidence bundles an auditor verifies offline (docs/evidence.md)."""


@evidence_group.command("export", short_help="Write the signed evidence bundle of sessions.")
@click.option(
    "--session", "session_ids", multiple=True, metavar="ID", help="This session (repeatable)."
)
@click.option(
    "--since",
    metavar="TIME",
    callback=given_moment,
    help="Sessions that ended at or after TIME (a date: its midnight UTC; or ISO 8601).",
)
@click.option(
    "--until",
    metavar="TIME",
    callback=given_moment,
    help="Sessions that ended before TIME (a date: its midnight UTC; or ISO 8601).",
)
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The archive to write (.tar: plain tar; otherwise gzipped).",
)
@config_option
@format_option
def evidence_export_command(
    session_ids: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    out: Path,
    config: Config,
    fmt: str,
) -> None:
    """Write the sessions' reports as received, normalised actions, runs with their
    findings, overrides, test logs and signed in-toto statements, with a signed
    manifest: the same sessions give the same bytes. TIME is a date (2026-11-29: its
    midnight UTC) or a date and time with its UTC offset (2026-11-29T10:00:00+02:00
    or ...Z), as every option that takes a moment."""
    written = evidence.export_file(config, evidence.BundleSelection(session_ids, since, until), out)
    emit(render.dumps(written.to_dict()) if fmt == "json" else render.written_text(written))


@evidence_group.command("verify", short_help="Verify an evidence bundle offline.")
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--key-fingerprint",
    metavar="FP",
    help="The signing key's fingerprint the bundle must carry (hex SHA-256 of the public key).",
)
@format_option
def evidence_verify_command(bundle: Path, key_fingerprint: str | None, fmt: str) -> None:
    """Check a bundle with the audit package alone: the archive, the key, the manifest's
    signature, every file's digest, each statement's signature, report hash, subjects
    and verdict. Exit 0 when it verifies, 1 with `reason: CODE` when it does not."""
    checked = evidence.verify_file(bundle, key_fingerprint)
    if checked.verified is not None:
        verified = checked.verified
        emit(render.dumps(verified.to_dict()) if fmt == "json" else render.bundle_text(verified))
    else:
        reason, message = checked.reason or "", checked.message or ""
        emit(
            render.bundle_refused_json(reason, message)
            if fmt == "json"
            else render.bundle_refused_text(reason, message)
        )
    exit_with(checked.exit_code)


@click.group("keys")
def keys_group() -> None:
    """The Ed25519 key that signs evidence bundles ([evidence] signing_key)."""


@keys_group.command("create", short_help="Create the evidence signing key.")
@click.option("--force", is_flag=True, help="Replace an existing key.")
@config_option
@format_option
def keys_create_command(force: bool, config: Config, fmt: str) -> None:
    """Create the Ed25519 key of [evidence] signing_key (mode 0600; the folders it
    makes for it 0700) and print its fingerprint, the hex SHA-256 of the raw public
    key: auditors pin it. A folder others may write to is refused."""
    path, fingerprint = evidence.create_signing_key(config, force=force)
    emit(
        render.key_json(path, fingerprint) if fmt == "json" else render.key_text(path, fingerprint)
    )
