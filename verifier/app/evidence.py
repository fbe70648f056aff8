"""Evidence bundles: the stored sessions an auditor verifies offline, signed.

The export side. `export` reads the store and builds the bundle's files
(`bundle_files`), packs them into a deterministic archive (`audit.bundle.pack`):
the same sessions, runs and key give the same bytes. The layout and its
verification live in `audit.bundle`, which never imports the verifier, so an
auditor needs only that package; docs/evidence.md describes both.

The signing key is an Ed25519 private key in a PKCS#8 PEM file, mode 0600,
made by `create_key` (`verifier keys create`); its fingerprint is the SHA-256
of the raw 32-byte public key, in hex.

The commands of ``verifier evidence export|verify`` and ``keys create`` are
`export_file`, `verify_file` and `create_signing_key`.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from audit.bundle import (
    ACTIONS_FILE,
    FORMAT,
    KEY_FILE,
    MANIFEST,
    MANIFEST_SIG,
    PREDICATE_TYPE,
    REPORT_FILE,
    STATEMENT_TYPE,
    BundleError,
    Verified,
    pack,
    run_test_log,
    statement_subjects,
    verdict_run,
    verify_bundle,
)
from audit.dsse import IN_TOTO_PAYLOAD_TYPE, envelope, fingerprint, is_fingerprint, pae
from audit.errors import SignatureError
from audit.jcs import CanonicalizationError, canonicalize
from audit.signing import load_private_key
from verifier import __version__
from verifier.errors import ConfigError, InvalidReport, NotFound, ReportPruned
from verifier.moments import utc_text
from verifier.store.rows import CLAIMED_CHANGE_KEYS, MAX_PAGE, SessionFilter

# The export's own imports (the store's SQLAlchemy, the contract with the google-genai SDK,
# the checks) are made where it uses them: `verify_file`, an auditor's offline check, and
# `create_signing_key` need none of them.
if TYPE_CHECKING:
    from verifier.config import Config
    from verifier.contract.profiles import Profile
    from verifier.store import Listed, RunRow, Store


# --- keys -------------------------------------------------------------------------------


def public_raw(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def key_fingerprint(key: Ed25519PrivateKey) -> str:
    """The key's name in bundles: the hex SHA-256 of its raw public key."""
    return fingerprint(public_raw(key))


def create_key(path: Path, *, force: bool = False) -> str:
    """Write a new Ed25519 signing key to `path` (mode 0600, the folders made for it
    0700: `key_folder`); its fingerprint.

    An existing file is kept unless `force`: bundles signed with it verify
    against its fingerprint only, so replacing it is a decision.
    """
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    key_folder(path.parent)
    target = path if not force else path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise ConfigError(
            f"evidence.signing_key: {str(path)!r} exists already; pass --force to replace it "
            "(bundles it signed then verify only against its old fingerprint)"
        ) from None
    except OSError as exc:
        raise ConfigError(f"evidence.signing_key: cannot write {str(path)!r}: {exc}") from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
            out.flush()
            os.fsync(out.fileno())
        if target != path:
            os.replace(target, path)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return key_fingerprint(key)


def key_folder(folder: Path) -> None:
    """Make the folders of `folder` that do not exist, each mode 0700 (whatever the
    umask); refuse `folder` when it exists and its group or others may write to it (they
    could replace the key). A folder that exists is otherwise left as it is."""
    where = "evidence.signing_key"
    missing = []
    at = folder
    while not at.exists():
        missing.append(at)
        if at.parent == at:
            break
        at = at.parent
    for made in reversed(missing):
        try:
            made.mkdir(mode=0o700)
            os.chmod(made, 0o700)
        except FileExistsError:
            pass  # made meanwhile by someone else: checked below like any folder that exists
        except OSError as exc:
            raise ConfigError(f"{where}: cannot create {str(made)!r}: {exc.strerror}") from None
    try:
        info = folder.stat()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read {str(folder)!r}: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{where}: {str(folder)!r} is not a folder")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        raise ConfigError(
            f"{where}: the folder {str(folder)!r} is writable by its group or others "
            f"(mode {mode:04o}): they could replace the key; use a folder of your own "
            f"(chmod go-w, or 0700)"
        )


def load_key(path: Path) -> Ed25519PrivateKey:
    """The signing key at `path`; a clear error when it is missing, open to others, or
    not an Ed25519 key."""
    where = f"evidence.signing_key: {str(path)!r}"
    try:
        return load_private_key(path)
    except FileNotFoundError:
        raise ConfigError(
            f"{where} does not exist; create it with `verifier keys create`"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{where} cannot be read: {exc.strerror}") from None
    except SignatureError as exc:
        raise ConfigError(f"{where} is {exc}") from None


# --- selection --------------------------------------------------------------------------


@dataclass(frozen=True)
class BundleSelection:
    """Which sessions a bundle holds: these ids, or those that ended in [since, until)."""

    session_ids: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        if self.session_ids and (self.since is not None or self.until is not None):
            raise ConfigError("--session: give --session or --since/--until, not both")
        if not self.session_ids and self.since is None and self.until is None:
            raise ConfigError("--session: give --session ID, or --since and/or --until")
        if self.since is not None and self.until is not None and self.until <= self.since:
            raise ConfigError(
                f"--until: {utc_text(self.until)} is not after --since {utc_text(self.since)}"
            )

    def to_dict(self) -> dict[str, Any]:
        if self.session_ids:
            return {"session_ids": sorted(set(self.session_ids))}
        return {
            "since": utc_text(self.since),
            "until": utc_text(self.until),
        }


def selected(store: Store, selection: BundleSelection) -> list[str]:
    """The ids of the selected sessions, sorted; `NotFound` for an unknown id or none at all."""
    if selection.session_ids:
        ids = sorted(set(selection.session_ids))
        for session_id in ids:
            store.get_session(session_id)  # NotFound names it
        return ids
    found: list[str] = []
    cursor: str | None = None
    filters = SessionFilter(ended_from=selection.since, ended_to=selection.until)
    while True:
        page = store.find_sessions(filters, limit=MAX_PAGE, cursor=cursor)
        found += [listed.session.session_id for listed in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    if not found:
        window = selection.to_dict()
        raise NotFound(
            f"no session ended between {window['since'] or 'the first'} and "
            f"{window['until'] or 'now'}: nothing to export"
        )
    return sorted(found)


# --- the bundle -------------------------------------------------------------------------


@dataclass(frozen=True)
class Export:
    """A bundle's bytes, the sessions it holds, and how many files."""

    data: bytes
    session_ids: tuple[str, ...]
    files: int


def export(
    store: Store,
    config: Config,
    selection: BundleSelection,
    key: Ed25519PrivateKey,
    *,
    compress: bool = True,
) -> Export:
    """The archive of the selected sessions (gzipped when `compress`)."""
    ids = selected(store, selection)
    files = bundle_files(store, config, ids, key, selection)
    return Export(pack(files, compress=compress), tuple(ids), len(files))


@dataclass(frozen=True)
class Written:
    """A bundle written to `out`: the sessions it holds, its files and bytes, and the
    fingerprint of the key that signed it (auditors pin it)."""

    out: Path
    session_ids: tuple[str, ...]
    files: int
    size: int
    key_fingerprint: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "sessions": list(self.session_ids),
            "files": self.files,
            "bytes": self.size,
            "key_fingerprint": self.key_fingerprint,
        }


def export_file(config: Config, selection: BundleSelection, out: Path) -> Written:
    """Write the bundle of the selected sessions to `out`, signed with the configured key
    (gzipped unless `out` ends in ``.tar``); `NotFound` when nothing is stored yet."""
    from verifier.store import NoStore, Store

    key = load_key(config.evidence.signing_key)
    try:
        with Store.open(config.database_url, read_only=True) as store:
            bundle = export(store, config, selection, key, compress=out.suffix != ".tar")
    except NoStore as exc:
        raise NotFound(f"nothing to export: {exc}") from None
    write_bundle(out, bundle.data)
    return Written(out, bundle.session_ids, bundle.files, len(bundle.data), key_fingerprint(key))


@dataclass(frozen=True)
class BundleCheck:
    """A bundle checked offline: what it holds when it verified, else the first failure's
    reason (a code of `audit.bundle.REASONS`) and message."""

    verified: Verified | None
    reason: str | None = None
    message: str | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.verified is not None else 1


def verify_file(path: Path, key_fingerprint: str | None = None) -> BundleCheck:
    """Check the bundle at `path` with the audit package alone (`audit.bundle`), against
    the signing key's fingerprint when one is given (`ConfigError` when it is not 64
    hex digits, or the file cannot be read)."""
    if key_fingerprint is not None and not is_fingerprint(key_fingerprint.lower()):
        raise ConfigError(f"--key-fingerprint: expected 64 hex digits, got {key_fingerprint!r}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {str(path)!r}: {exc.strerror}") from None
    try:
        return BundleCheck(verify_bundle(data, key_fingerprint))
    except BundleError as exc:  # a bundle that does not verify is this check's answer
        return BundleCheck(None, exc.reason, exc.message)


def create_signing_key(config: Config, *, force: bool = False) -> tuple[Path, str]:
    """Create the key of ``[evidence] signing_key`` (`create_key`); its path and fingerprint."""
    path = config.evidence.signing_key
    return path, create_key(path, force=force)


def write_bundle(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all (a temporary file, then a rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"--out: cannot write {str(path)!r}: {exc.strerror}") from None


def bundle_files(
    store: Store,
    config: Config,
    session_ids: Sequence[str],
    key: Ed25519PrivateKey,
    selection: BundleSelection,
) -> dict[str, bytes]:
    """Every file of the bundle by its name, the manifest and its signature included."""
    fp = key_fingerprint(key)
    files: dict[str, bytes] = {
        KEY_FILE: canonicalize(
            {"algorithm": "ed25519", "fingerprint": fp, "public_key": public_raw(key).hex()}
        )
    }
    sessions = []
    profiles: dict[str | None, tuple[Profile, str | None]] = {}  # read once per export
    for session_id in session_ids:
        base = f"sessions/{_dir_name(session_id)}/"
        own = session_files(store, config, session_id, key, profiles)
        files.update({base + name: data for name, data in own.items()})
        sessions.append(
            {"session_id": session_id, "dir": base, "report_included": REPORT_FILE in own}
        )
    manifest = {
        "format": FORMAT,
        "exporter": {"name": "verifier", "version": __version__},
        "key_fingerprint": fp,
        "selection": selection.to_dict(),
        "sessions": sessions,
        "files": [
            {"path": name, "size": len(data), "sha256": _sha256(data)}
            for name, data in sorted(files.items())
        ],
    }
    manifest_bytes = canonicalize(manifest)
    files[MANIFEST] = manifest_bytes
    files[MANIFEST_SIG] = canonicalize(
        {
            "algorithm": "ed25519",
            "keyid": fp,
            "manifest_sha256": _sha256(manifest_bytes),
            "signature": key.sign(manifest_bytes).hex(),
        }
    )
    return files


def session_files(
    store: Store,
    config: Config,
    session_id: str,
    key: Ed25519PrivateKey,
    profiles: dict[str | None, tuple[Profile, str | None]] | None = None,
) -> dict[str, bytes]:
    """One session's files: its report as received (unless pruned), its record, its
    actions, runs and test logs, and its signed statement. `profiles`: the tool
    profiles read so far, by name, kept across the sessions of one export."""
    from verifier.store.overrides import overrides

    listed = store.listed(session_id)
    runs = [_run_dict(run) for run in store.runs(session_id)]
    try:
        raw: bytes | None = store.report_bytes(session_id)
    except ReportPruned:
        raw = None
    changes = _claimed_changes(store, session_id, raw)
    verdict = {
        "computed": listed.delivery_status,
        "override": listed.session.override_status,
        "effective": listed.effective_status,
    }
    record = _session_dict(listed, changes, verdict)
    record["overrides"] = [
        {**o.to_dict(), "at": utc_text(o.at)} for o in overrides(store, session_id)
    ]
    files = {
        "session.json": _json_bytes(record),
        "runs.json": _json_bytes(runs),
        "test-logs.json": _json_bytes([log for run in runs if (log := run_test_log(run))]),
    }
    if raw is not None:
        files[REPORT_FILE] = raw
        files[ACTIONS_FILE] = _json_bytes(normalised_actions(raw, config, profiles))
    statement = delivery_statement(listed, runs, changes, verdict, included=raw is not None)
    payload = canonicalize(statement)
    signature = key.sign(pae(IN_TOTO_PAYLOAD_TYPE, payload))
    files["statement.dsse.json"] = canonicalize(
        envelope(payload, IN_TOTO_PAYLOAD_TYPE, key_fingerprint(key), signature)
    )
    return files


def delivery_statement(
    listed: Listed,
    runs: Sequence[Mapping[str, Any]],
    changes: Sequence[Mapping[str, Any]],
    verdict: Mapping[str, Any],
    *,
    included: bool,
) -> dict[str, Any]:
    """The in-toto Statement v1 of one session: its delivered files as subjects (the
    report itself when it delivered none), and what the verifier concluded of them as
    the predicate. Pure: no I/O."""
    session = listed.session
    run = verdict_run(runs)
    return {
        "_type": STATEMENT_TYPE,
        "subject": statement_subjects(changes, session.report_sha256),
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "session_id": session.session_id,
            "agent": _agent(listed),
            "repo": _repo(listed),
            "report": {
                "sha256": session.report_sha256,
                "included": included,
                "pruned_at": utc_text(session.pruned_at),
            },
            "verdict": dict(verdict),
            "run": None
            if run is None
            else {
                "id": run["id"],
                "verified_at": run["finished_at"],
                "verifier_version": run["verifier_version"],
            },
            "checks": {} if run is None else run["checks"],
            "exporter": {"name": "verifier", "version": __version__},
        },
    }


def normalised_actions(
    raw: bytes,
    config: Config,
    profiles: dict[str | None, tuple[Profile, str | None]] | None = None,
) -> dict[str, Any]:
    """The trajectory's calls as the session's tool profile reads them (as the replay
    check does): each call's normalised action beside the raw call. `profiles` keeps
    each profile read (or its refusal) by name, for the next session of an export."""
    from verifier.checks.replay import succeeded
    from verifier.contract.profiles import Profile, load_profile
    from verifier.contract.report import parse_report

    try:
        report = parse_report(raw)
        trajectory = report.trajectory
    except InvalidReport as exc:  # stored before this verifier's contract: say so
        return {"profile": None, "error": str(exc), "actions": []}
    name = report.doc.agent.tool_profile
    known = {} if profiles is None else profiles
    if name not in known:
        try:
            known[name] = (load_profile(config.profiles_dir, name), None)
        except ConfigError as exc:
            known[name] = (Profile(name or "default"), f"{exc}: every call is unknown")
    profile, note = known[name]
    actions = []
    for call in trajectory.calls:
        action = profile.normalise(call)
        actions.append(
            {
                "call_id": call.call_id,
                "name": call.name,
                "location": trajectory.location(call.turn, call.part),
                "args": dict(call.args),
                "response": call.response_object,
                "succeeded": succeeded(profile, call),
                "action": {
                    "kind": action.kind.value,
                    "params": dict(action.params),
                    "permission": None if action.permission is None else action.permission.value,
                    "problems": list(action.problems),
                    "extra": list(action.extra),
                },
            }
        )
    return {
        "profile": profile.name,
        "profile_note": note,
        "trajectory_format": trajectory.format,
        "actions": actions,
    }


def _claimed_changes(store: Store, session_id: str, raw: bytes | None) -> list[dict[str, Any]]:
    """The claimed changes: the report's own (as written) when it is kept; else the store's."""
    if raw is not None:
        try:
            doc = json.loads(raw)
            return [{k: c.get(k) for k in CLAIMED_CHANGE_KEYS} for c in doc["changes"]]
        except (ValueError, KeyError, TypeError, AttributeError):
            pass  # a stored report always has them; the store's copy otherwise
    return store.claimed_changes(session_id)  # the store keeps them when the report is pruned


def _session_dict(
    listed: Listed, changes: Sequence[Mapping[str, Any]], verdict: Mapping[str, Any]
) -> dict[str, Any]:
    s = listed.session
    return {
        "session_id": s.session_id,
        "agent": _agent(listed),
        "agent_status": {"raw": s.raw_status, "status": s.status, "done": s.done},
        "repo": _repo(listed),
        "started_at": utc_text(s.started_at),
        "ended_at": utc_text(s.ended_at),
        "ingested_at": utc_text(s.ingested_at),
        "report_sha256": s.report_sha256,
        "pruned_at": utc_text(s.pruned_at),
        "claimed_changes": list(changes),
        "verdict": dict(verdict),
    }


def _agent(listed: Listed) -> dict[str, Any]:
    s = listed.session
    return {
        "name": s.agent_name,
        "version": s.agent_version,
        "model": s.agent_model,
        "tool_profile": s.tool_profile,
    }


def _repo(listed: Listed) -> dict[str, Any]:
    s = listed.session
    return {
        "name": s.repo_name,
        "base_commit": s.base_commit,
        "head_commit": s.head_commit,
        "branch": s.branch,
    }


def _run_dict(run: RunRow) -> dict[str, Any]:
    return {
        "id": run.id,
        "session_id": run.session_id,
        "verifier_version": run.verifier_version,
        "delivery_status": run.delivery_status.value,
        "checks": {name: status.value for name, status in run.checks.items()},
        "started_at": utc_text(run.started_at),
        "finished_at": utc_text(run.finished_at),
        "duration_s": run.duration_s,
        "reason": run.reason,
        "worker": run.worker,
        "findings": [f.to_dict() for f in run.findings],
        "result": run.result,
    }


def _dir_name(session_id: str) -> str:
    """A session's folder: its id (letters, digits, ``._:-``), unless a path would
    read it as another folder (``.`` and ``..``)."""
    return session_id if session_id not in (".", "..") else f"_{_sha256(session_id.encode())[:16]}"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _json_bytes(value: Any) -> bytes:
    """JCS when the value has a JCS form; else sorted, ASCII-escaped JSON (a lone
    surrogate in a recorded argument), deterministic either way."""
    try:
        return canonicalize(value)
    except CanonicalizationError:
        return json.dumps(
            value, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str
        ).encode("ascii")
