"""`verifier evidence export|verify` and `verifier keys create`: faces of
`verifier.app.evidence` (export) and `audit.bundle` (verification, offline)."""

from __future__ import annotations

from pathlib import Path

import click

from verifier.cli.common import _emit, config_option, format_option
from verifier.config import Config
from verifier.errors import ConfigError, NotFound
from verifier.formats import render


@click.group("evidence")
def evidence_group() -> None:
    """Signed evidence bundles an auditor verifies offline (docs/evidence.md)."""


@evidence_group.command("export", short_help="Write the signed evidence bundle of sessions.")
@click.option(
    "--session", "session_ids", multiple=True, metavar="ID", help="This session (repeatable)."
)
@click.option("--since", metavar="TIME", help="Sessions that ended at or after TIME (ISO 8601).")
@click.option("--until", metavar="TIME", help="Sessions that ended before TIME (ISO 8601).")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The archive to write (.tar: plain tar; otherwise gzipped).",
)
@config_option
@format_option
def evidence_export_cmd(
    session_ids: tuple[str, ...],
    since: str | None,
    until: str | None,
    out: Path,
    config_path: Path | None,
    fmt: str,
) -> None:
    """Write the sessions' reports as received, normalised actions, runs with their
    findings, overrides, test logs and signed in-toto statements, with a signed
    manifest: the same sessions give the same bytes. TIME has its UTC offset
    (2026-11-29T10:00:00+00:00 or ...Z)."""
    from verifier.app.evidence import (
        BundleSelection,
        export,
        key_fingerprint,
        load_key,
        write_bundle,
    )
    from verifier.moments import parse_moment
    from verifier.store import NoStore, Store

    selection = BundleSelection(
        session_ids,
        None if since is None else parse_moment(since, "--since"),
        None if until is None else parse_moment(until, "--until"),
    )
    config = Config.load(config_path)
    key = load_key(config.evidence.signing_key)
    try:
        with Store.open(config.database_url, read_only=True) as store:
            bundle = export(store, config, selection, key, compress=out.suffix != ".tar")
    except NoStore as exc:
        raise NotFound(f"nothing to export: {exc}") from None
    write_bundle(out, bundle.data)
    summary = {
        "out": str(out),
        "sessions": list(bundle.session_ids),
        "files": bundle.files,
        "bytes": len(bundle.data),
        "key_fingerprint": key_fingerprint(key),
    }
    if fmt == "json":
        _emit(render.dumps(summary))
    else:
        _emit(
            f"wrote {out}: {len(bundle.session_ids)} session(s), {bundle.files} files, "
            f"{len(bundle.data)} bytes\n"
            f"signed by key {summary['key_fingerprint']}\n"
        )


@evidence_group.command("verify", short_help="Verify an evidence bundle offline.")
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--key-fingerprint",
    metavar="FP",
    help="The signing key's fingerprint the bundle must carry (hex SHA-256 of the public key).",
)
@format_option
def evidence_verify_cmd(bundle: Path, key_fingerprint: str | None, fmt: str) -> None:
    """Check a bundle with the audit package alone: the archive, the key, the manifest's
    signature, every file's digest, each statement's signature, report hash, subjects
    and verdict. Exit 0 when it verifies, 1 with `reason: CODE` when it does not."""
    from audit.bundle import BundleError, verify_bundle
    from audit.dsse import is_fingerprint
    from verifier.cli.main import _Exit  # the exit code, once the output is written

    if key_fingerprint is not None and not is_fingerprint(key_fingerprint.lower()):
        raise ConfigError(f"--key-fingerprint: expected 64 hex digits, got {key_fingerprint!r}")
    try:
        data = bundle.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {str(bundle)!r}: {exc.strerror}") from None
    try:
        verified = verify_bundle(data, key_fingerprint)
    except BundleError as exc:
        if fmt == "json":
            _emit(render.dumps({"ok": False, "reason": exc.reason, "message": exc.message}))
        else:
            _emit(f"reason: {exc.reason}\n{exc.message}\n")
        raise _Exit(1) from None
    if fmt == "json":
        _emit(render.dumps(verified.to_dict()))
    else:
        lines = [f"verified: {len(verified.sessions)} session(s), {verified.files} files"]
        lines.append(f"signed by key {verified.key_fingerprint}")
        for s in verified.sessions:
            verdict = s["verdict"] or {}
            report = "report included" if s["report_included"] else "report pruned"
            lines.append(
                f"  {s['session_id']}: {verdict.get('computed')} "
                f"(effective {verdict.get('effective')}), {s['subjects']} file(s), {report}"
            )
        _emit("\n".join(lines) + "\n")


@click.group("keys")
def keys_group() -> None:
    """The Ed25519 key that signs evidence bundles ([evidence] signing_key)."""


@keys_group.command("create", short_help="Create the evidence signing key.")
@click.option("--force", is_flag=True, help="Replace an existing key.")
@config_option
@format_option
def keys_create_cmd(force: bool, config_path: Path | None, fmt: str) -> None:
    """Create the Ed25519 key of [evidence] signing_key (mode 0600) and print its
    fingerprint, the hex SHA-256 of the raw public key: auditors pin it."""
    from verifier.app.evidence import create_key

    config = Config.load(config_path)
    path = config.evidence.signing_key
    fp = create_key(path, force=force)
    if fmt == "json":
        _emit(render.dumps({"path": str(path), "fingerprint": fp}))
    else:
        _emit(f"wrote {path}\nfingerprint {fp}\n")
