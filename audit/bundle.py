"""Evidence bundles: their layout, their bytes, and their verification offline.

An auditor verifies a bundle with this package and `cryptography` alone: no
verifier, no store, no network (docs/evidence.md). The layout::

    manifest.json                  every other file (but the signature) with size and SHA-256
    manifest.sig.json              Ed25519 signature over manifest.json's exact bytes
    public-key.json                the signing key (raw, hex) and its fingerprint
    sessions/<id>/report.json      the report exactly as received (not in a pruned session)
    sessions/<id>/session.json     the stored session, its claimed changes, verdict, overrides
    sessions/<id>/actions.json     the trajectory's calls as normalised actions (not if pruned)
    sessions/<id>/runs.json        every verification run with its findings
    sessions/<id>/test-logs.json       each run's test log excerpt with the full log's hash
    sessions/<id>/statement.dsse.json   an in-toto Statement v1 in a DSSE envelope

`verify_bundle` checks, in order, and stops at the first failure with its
reason code (`REASONS`):

1. read the archive (gzip or plain tar): whole, regular files only, safe names;
2. the public key: well formed, its fingerprint its SHA-256; the one pinned, if any;
3. the manifest's signature, by that key, over manifest.json's bytes;
4. the manifest: its shape; the archive holds exactly the files it lists, each
   with its size and SHA-256;
5. per session: the statement's DSSE signature by the same key; the report's
   bytes hash to the report_sha256 the statement binds; the statement's
   subjects are the report's delivered files (the report itself when it
   delivers none: never an empty subject); its verdict, run and check
   statuses are those of the runs; the test logs are the runs'.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from audit.dsse import IN_TOTO_PAYLOAD_TYPE, EnvelopeError, fingerprint, verify_envelope
from audit.errors import AuditError

__all__ = [
    "FORMAT",
    "KEY_FILE",
    "MANIFEST",
    "MANIFEST_SIG",
    "PREDICATE_TYPE",
    "REASONS",
    "STATEMENT_TYPE",
    "BundleError",
    "Verified",
    "delivered_files",
    "pack",
    "read_archive",
    "run_test_log",
    "statement_subjects",
    "verdict_run",
    "verify_bundle",
]

FORMAT = "https://verifier.dev/evidence-bundle/v1"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://verifier.dev/delivery/v1"
MANIFEST = "manifest.json"
MANIFEST_SIG = "manifest.sig.json"
KEY_FILE = "public-key.json"
SESSION_FILES = ("session.json", "runs.json", "test-logs.json", "statement.dsse.json")
REPORT_FILE = "report.json"
ACTIONS_FILE = "actions.json"
CONCLUSIVE = ("delivered", "not_delivered")
_BLOCK = 512

# Every reason a bundle is refused, in the order the steps meet them.
REASONS: dict[str, str] = {
    "archive_truncated": "the archive ends early (gzip stream or tar end marker missing)",
    "archive_unreadable": "not a gzip or tar archive, or its gzip data is corrupt",
    "archive_unsafe": "a member is not a regular file, has an unsafe or duplicate name",
    "manifest_missing": "manifest.json or manifest.sig.json is not in the archive",
    "key_invalid": "public-key.json is missing, malformed, or its fingerprint is not its hash",
    "key_mismatch": "the bundle's key is not the one pinned with --key-fingerprint",
    "signature_wrong_key": "the manifest is signed by another key than the bundle's",
    "manifest_modified": "manifest.json is not the manifest that was signed",
    "manifest_signature_invalid": "the manifest's signature does not verify, or is malformed",
    "manifest_invalid": "the signed manifest does not have the bundle's shape",
    "file_missing": "a file the manifest lists is not in the archive",
    "file_unlisted": "the archive holds a file the manifest does not list",
    "digest_mismatch": "a file's size or SHA-256 differs from the manifest's",
    "statement_invalid": "a session's DSSE envelope or in-toto statement is malformed",
    "statement_signature_invalid": "a session's statement is not signed by the bundle's key",
    "report_missing": "the statement says the report is included, and it is not",
    "report_hash_mismatch": "a report's bytes do not hash to the report_sha256 bound to it",
    "statement_mismatch": "a statement disagrees with its session's report, runs or record",
    "evidence_mismatch": "a session's files disagree with each other (tests, runs, session)",
}


class BundleError(AuditError):
    """A bundle refused: `reason` is a code of `REASONS`, the message says what and where."""

    code = "bundle"

    def __init__(self, reason: str, message: str) -> None:
        assert reason in REASONS, reason
        self.reason = reason
        self.message = message
        super().__init__(f"{reason}: {message}")


@dataclass(frozen=True)
class Verified:
    """What a bundle that verified holds."""

    key_fingerprint: str
    files: int
    sessions: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": True,
            "key_fingerprint": self.key_fingerprint,
            "files": self.files,
            "sessions": list(self.sessions),
        }


def pack(files: Mapping[str, bytes], *, compress: bool = True) -> bytes:
    """The archive of `files`, byte for byte the same for the same files.

    A ustar tar (no pax headers, so no timestamps of their own) with the names
    sorted, mtime 0, uid and gid 0, no owner names, mode 0644; gzipped with
    mtime 0 and no file name when `compress`.
    """
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size = len(files[name])
            info.mtime = 0
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.type = tarfile.REGTYPE
            tar.addfile(info, io.BytesIO(files[name]))
    data = raw.getvalue()
    if not compress:
        return data
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(data)
    return out.getvalue()


def delivered_files(changes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The statement's subjects: each claimed change that leaves a file (not deleted),
    with the SHA-256 claimed at the head, sorted by path."""
    subjects = {
        c["path"]: c["sha256_after"]
        for c in changes
        if c.get("action") != "delete" and isinstance(c.get("sha256_after"), str)
    }
    return [{"name": p, "digest": {"sha256": d}} for p, d in sorted(subjects.items())]


def statement_subjects(
    changes: Sequence[Mapping[str, Any]], report_sha256: str
) -> list[dict[str, Any]]:
    """The statement's subjects: the delivered files (`delivered_files`); when the session
    delivered none (no claimed change, or only deletions), the report itself, named
    `REPORT_FILE` with its SHA-256. An in-toto Statement needs at least one subject
    (in-toto-attestation's validator and sigstore's model refuse an empty list), and a
    digest they know (sigstore takes SHA-2 and SHA-3 only, not a gitCommit)."""
    files = delivered_files(changes)
    return files or [{"name": REPORT_FILE, "digest": {"sha256": report_sha256}}]


def verdict_run(runs: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The run a session's verdict comes from: the latest conclusive, else the latest."""
    conclusive = [r for r in runs if r.get("delivery_status") in CONCLUSIVE]
    if conclusive:
        return conclusive[-1]
    return runs[-1] if runs else None


def verify_bundle(data: bytes, key_fingerprint: str | None = None) -> Verified:
    """Verify a bundle's bytes offline; `BundleError` with the first failure's reason."""
    files = read_archive(data)
    public_key, fp = _public_key(files)
    if key_fingerprint is not None and key_fingerprint.lower() != fp:
        raise BundleError(
            "key_mismatch",
            f"the bundle is signed by key {fp}, expected {key_fingerprint.lower()}",
        )
    _check_signature(files, public_key, fp)
    manifest = _manifest(files, fp)
    _check_files(files, manifest)
    sessions = tuple(_check_session(files, entry, public_key, fp) for entry in manifest["sessions"])
    return Verified(fp, len(files), sessions)


def read_archive(data: bytes) -> dict[str, bytes]:
    """Step 1: every member of the archive by name; whole, regular and safely named."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except EOFError:
            raise BundleError("archive_truncated", "the gzip stream ends early") from None
        except (OSError, zlib.error) as exc:
            raise BundleError("archive_unreadable", f"corrupt gzip data: {exc}") from None
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar:
                _safe_member(member, files)
                extracted = tar.extractfile(member)
                assert extracted is not None  # a regular file
                content = extracted.read()
                if len(content) != member.size:
                    raise BundleError("archive_truncated", f"{member.name}: cut short")
                files[member.name] = content
            end = tar.offset
    except tarfile.ReadError as exc:
        if "unexpected end" in str(exc) or "truncated" in str(exc):
            raise BundleError("archive_truncated", f"the tar data ends early: {exc}") from None
        raise BundleError("archive_unreadable", f"not a tar archive: {exc}") from None
    except EOFError as exc:
        raise BundleError("archive_truncated", f"the tar data ends early: {exc}") from None
    # A tar cut at a member's boundary reads as a shorter archive: its end marker
    # (two zero blocks) is what says it is whole.
    if data[end : end + 2 * _BLOCK] != bytes(2 * _BLOCK):
        raise BundleError("archive_truncated", "the tar end marker (two zero blocks) is missing")
    if not files:
        raise BundleError("manifest_missing", "the archive holds no file")
    return files


def _safe_member(member: tarfile.TarInfo, seen: Mapping[str, bytes]) -> None:
    name = member.name
    parts = name.split("/")
    if not member.isreg():
        raise BundleError("archive_unsafe", f"{name!r} is not a regular file")
    if name.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in name:
        raise BundleError("archive_unsafe", f"{name!r} is not a safe relative name")
    if name in seen:
        raise BundleError("archive_unsafe", f"{name!r} appears twice")


def _json(data: bytes, where: str, reason: str) -> Any:
    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError("duplicate keys")
        return dict(pairs)

    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=no_duplicates)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BundleError(reason, f"{where}: not JSON: {exc}") from None


def _hex(value: Any, size: int) -> bytes | None:
    """Lowercase hex of exactly `size` bytes, else None."""
    if not isinstance(value, str) or len(value) != 2 * size or value != value.lower():
        return None
    try:
        return bytes.fromhex(value)
    except ValueError:
        return None


def _public_key(files: Mapping[str, bytes]) -> tuple[Ed25519PublicKey, str]:
    """Step 2: the bundle's key and its fingerprint."""
    if KEY_FILE not in files:
        raise BundleError("key_invalid", f"{KEY_FILE} is not in the archive")
    doc = _json(files[KEY_FILE], KEY_FILE, "key_invalid")
    if not isinstance(doc, dict) or set(doc) != {"algorithm", "fingerprint", "public_key"}:
        raise BundleError("key_invalid", f"{KEY_FILE}: expected algorithm, fingerprint, public_key")
    if doc["algorithm"] != "ed25519":
        raise BundleError(
            "key_invalid", f"{KEY_FILE}: algorithm is {doc['algorithm']!r}, expected 'ed25519'"
        )
    raw = _hex(doc["public_key"], 32)
    if raw is None:
        raise BundleError("key_invalid", f"{KEY_FILE}: public_key is not 32 bytes in lowercase hex")
    fp = fingerprint(raw)
    if doc["fingerprint"] != fp:
        raise BundleError(
            "key_invalid",
            f"{KEY_FILE}: fingerprint {doc['fingerprint']!r:.80} is not the key's "
            f"SHA-256 (got {doc['fingerprint']!r:.80}, expected {fp})",
        )
    return Ed25519PublicKey.from_public_bytes(raw), fp


def _check_signature(files: Mapping[str, bytes], key: Ed25519PublicKey, fp: str) -> None:
    """Step 3: manifest.json's bytes are what the bundle's key signed."""
    for name in (MANIFEST, MANIFEST_SIG):
        if name not in files:
            raise BundleError("manifest_missing", f"{name} is not in the archive")
    doc = _json(files[MANIFEST_SIG], MANIFEST_SIG, "manifest_signature_invalid")
    if not isinstance(doc, dict) or set(doc) != {
        "algorithm",
        "keyid",
        "manifest_sha256",
        "signature",
    }:
        raise BundleError(
            "manifest_signature_invalid",
            f"{MANIFEST_SIG}: expected algorithm, keyid, manifest_sha256, signature",
        )
    signature = _hex(doc["signature"], 64)
    if doc["algorithm"] != "ed25519" or signature is None:
        raise BundleError(
            "manifest_signature_invalid",
            f"{MANIFEST_SIG}: expected an ed25519 signature of 64 bytes in lowercase hex",
        )
    if doc["keyid"] != fp:
        raise BundleError(
            "signature_wrong_key",
            f"the manifest is signed by key {doc['keyid']!r:.80}, the bundle's key is {fp}",
        )
    digest = hashlib.sha256(files[MANIFEST]).hexdigest()
    try:
        key.verify(signature, files[MANIFEST])
    except InvalidSignature:
        if doc["manifest_sha256"] != digest:
            raise BundleError(
                "manifest_modified",
                f"{MANIFEST} has SHA-256 {digest}, the signed manifest had "
                f"{doc['manifest_sha256']!r:.80}",
            ) from None
        raise BundleError(
            "manifest_signature_invalid", f"the signature does not verify with key {fp}"
        ) from None
    if doc["manifest_sha256"] != digest:
        raise BundleError(
            "manifest_signature_invalid",
            f"{MANIFEST_SIG}: manifest_sha256 is {doc['manifest_sha256']!r:.80}, expected {digest}",
        )


def _manifest(files: Mapping[str, bytes], fp: str) -> dict[str, Any]:
    """Step 4, its shape: the signed manifest is one this module wrote."""
    doc = _json(files[MANIFEST], MANIFEST, "manifest_invalid")

    def bad(problem: str) -> BundleError:
        return BundleError("manifest_invalid", f"{MANIFEST}: {problem}")

    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise bad(f"format is not {FORMAT!r}")
    if doc.get("key_fingerprint") != fp:
        raise bad(f"key_fingerprint is {doc.get('key_fingerprint')!r:.80}, expected {fp}")
    listed = doc.get("files")
    if not isinstance(listed, list) or not all(
        isinstance(f, dict)
        and set(f) == {"path", "size", "sha256"}
        and isinstance(f["path"], str)
        and isinstance(f["size"], int)
        and _hex(f["sha256"], 32) is not None
        for f in listed
    ):
        raise bad("files: expected a list of {path, size, sha256}")
    sessions = doc.get("sessions")
    if not isinstance(sessions, list) or not all(
        isinstance(s, dict)
        and isinstance(s.get("session_id"), str)
        and isinstance(s.get("dir"), str)
        and s["dir"].startswith("sessions/")
        and s["dir"].endswith("/")
        and isinstance(s.get("report_included"), bool)
        for s in sessions
    ):
        raise bad("sessions: expected a list of {session_id, dir, report_included}")
    for key in ("session_id", "dir"):
        values = [s[key] for s in sessions]
        if len(set(values)) != len(values):
            raise bad(f"sessions: a {key} appears twice")
    return doc


def _check_files(files: Mapping[str, bytes], manifest: Mapping[str, Any]) -> None:
    """Step 4, the files: exactly those listed, each as listed."""
    listed = {f["path"]: f for f in manifest["files"]}
    present = set(files) - {MANIFEST, MANIFEST_SIG}
    for path in sorted(set(listed) - present):
        raise BundleError("file_missing", f"{path} is listed in the manifest, not in the archive")
    for path in sorted(present - set(listed)):
        raise BundleError("file_unlisted", f"{path} is in the archive, not in the manifest")
    for path in sorted(listed):
        size, digest = len(files[path]), hashlib.sha256(files[path]).hexdigest()
        entry = listed[path]
        if size != entry["size"] or digest != entry["sha256"]:
            raise BundleError(
                "digest_mismatch",
                f"{path}: got {size} bytes with SHA-256 {digest}, expected {entry['size']} "
                f"bytes with SHA-256 {entry['sha256']}",
            )
    in_sessions = {s["dir"] for s in manifest["sessions"]}
    for path in sorted(present - {KEY_FILE}):
        if path.rsplit("/", 1)[0] + "/" not in in_sessions:
            raise BundleError("manifest_invalid", f"{path} belongs to no session of the manifest")


def _check_session(
    files: Mapping[str, bytes], entry: Mapping[str, Any], key: Ed25519PublicKey, fp: str
) -> dict[str, Any]:
    """Step 5: one session's statement, report, runs and logs agree."""
    sid, base = entry["session_id"], entry["dir"]
    for name in SESSION_FILES:
        if base + name not in files:
            raise BundleError("evidence_mismatch", f"session {sid!r}: {base}{name} is missing")
    where = f"{base}statement.dsse.json"
    envelope = _json(files[where], where, "statement_invalid")
    try:
        payload = verify_envelope(envelope, key, fp, IN_TOTO_PAYLOAD_TYPE)
    except EnvelopeError as exc:
        reason = "statement_signature_invalid" if exc.kind == "signature" else "statement_invalid"
        raise BundleError(reason, f"{where}: {exc}") from None
    statement = _json(payload, f"{where} payload", "statement_invalid")
    predicate = _statement_predicate(statement, where)

    def mismatch(problem: str) -> BundleError:
        return BundleError("statement_mismatch", f"session {sid!r}: {problem}")

    if predicate.get("session_id") != sid:
        raise mismatch(f"the statement is of session {predicate.get('session_id')!r:.140}")
    report_info = predicate.get("report")
    if not isinstance(report_info, dict):
        raise BundleError("statement_invalid", f"{where}: predicate.report is not an object")
    included = report_info.get("included") is True
    report = files.get(base + REPORT_FILE)
    if included != entry["report_included"]:
        raise mismatch("the manifest and the statement disagree on whether the report is included")
    if included and report is None:
        raise BundleError("report_missing", f"session {sid!r}: {base}{REPORT_FILE} is missing")
    if not included and report is not None:
        raise mismatch(f"{base}{REPORT_FILE} is present, the statement says it was pruned")
    if report is not None:
        digest = hashlib.sha256(report).hexdigest()
        if digest != report_info.get("sha256"):
            raise BundleError(
                "report_hash_mismatch",
                f"session {sid!r}: {base}{REPORT_FILE} has SHA-256 {digest}, the statement "
                f"binds report_sha256 {report_info.get('sha256')!r:.80}",
            )

    session = _json(files[base + "session.json"], base + "session.json", "evidence_mismatch")
    runs = _json(files[base + "runs.json"], base + "runs.json", "evidence_mismatch")
    tests = _json(files[base + "test-logs.json"], base + "test-logs.json", "evidence_mismatch")
    if not isinstance(session, dict) or not isinstance(runs, list) or not isinstance(tests, list):
        raise BundleError("evidence_mismatch", f"session {sid!r}: a file has the wrong shape")
    if session.get("session_id") != sid:
        raise mismatch(f"session.json is of session {session.get('session_id')!r:.140}")
    if session.get("report_sha256") != report_info.get("sha256"):
        raise mismatch("session.json and the statement name different report_sha256")

    subjects = statement["subject"]
    changes = session.get("claimed_changes")
    report_sha256 = report_info.get("sha256")
    if not isinstance(report_sha256, str):
        raise BundleError("statement_invalid", f"{where}: predicate.report.sha256 is not text")
    if not isinstance(changes, list) or subjects != statement_subjects(changes, report_sha256):
        raise mismatch("the statement's subjects are not the claimed changes of session.json")
    if report is not None:
        doc = _json(report, base + REPORT_FILE, "statement_mismatch")
        claimed = doc.get("changes") if isinstance(doc, dict) else None
        if not isinstance(claimed, list) or subjects != statement_subjects(claimed, report_sha256):
            raise mismatch("the statement's subjects are not the report's delivered files")

    _check_runs(sid, predicate, runs, session)
    _check_tests(sid, runs, tests)
    return {
        "session_id": sid,
        "verdict": predicate.get("verdict"),
        "report_included": included,
        "subjects": len(subjects),
        "runs": len(runs),
    }


def _statement_predicate(statement: Any, where: str) -> dict[str, Any]:
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise BundleError("statement_invalid", f"{where}: _type is not {STATEMENT_TYPE!r}")
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise BundleError("statement_invalid", f"{where}: predicateType is not {PREDICATE_TYPE!r}")
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or not all(
        isinstance(s, dict)
        and isinstance(s.get("name"), str)
        and isinstance(s.get("digest"), dict)
        and _hex(s["digest"].get("sha256"), 32) is not None
        for s in subjects
    ):
        raise BundleError("statement_invalid", f"{where}: subject is not a list of name, digest")
    if not subjects:
        raise BundleError(
            "statement_invalid",
            f"{where}: subject is empty: an in-toto Statement has at least one subject",
        )
    predicate = statement.get("predicate")
    if not isinstance(predicate, dict):
        raise BundleError("statement_invalid", f"{where}: predicate is not an object")
    return predicate


def _check_runs(
    sid: str, predicate: Mapping[str, Any], runs: list[Any], session: Mapping[str, Any]
) -> None:
    """The statement's verdict, run and checks are those of the runs."""

    def mismatch(problem: str) -> BundleError:
        return BundleError("statement_mismatch", f"session {sid!r}: {problem}")

    if not all(isinstance(r, dict) and r.get("session_id") == sid for r in runs):
        raise mismatch("runs.json holds a run of another session")
    chosen = verdict_run(runs)
    claimed_run = predicate.get("run")
    verdict = predicate.get("verdict")
    if not isinstance(verdict, dict):
        raise mismatch("the statement has no verdict")
    if chosen is None:
        if claimed_run is not None or verdict.get("computed") != "pending":
            raise mismatch("no run is exported, and the statement names a verdict")
        return
    expected_run = {
        "id": chosen.get("id"),
        "verified_at": chosen.get("finished_at"),
        "verifier_version": chosen.get("verifier_version"),
    }
    if claimed_run != expected_run:
        raise mismatch(f"the statement's run is {claimed_run!r:.200}, expected {expected_run!r}")
    if verdict.get("computed") != chosen.get("delivery_status"):
        raise mismatch(
            f"the statement's verdict is {verdict.get('computed')!r}, the run's "
            f"{chosen.get('delivery_status')!r}"
        )
    if predicate.get("checks") != chosen.get("checks"):
        raise mismatch("the statement's check statuses are not the run's")
    if session.get("verdict") != verdict:
        raise mismatch("session.json and the statement give different verdicts")
    changes = (chosen.get("result") or {}).get("checks", {}).get("changes", {})
    head = (changes.get("details") or {}).get("head_commit")
    repo = predicate.get("repo") or {}
    if head is not None and head != repo.get("head_commit"):
        raise mismatch(
            f"the run checked head {head}, the statement names {repo.get('head_commit')}"
        )


def run_test_log(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """A run's test log as test-logs.json keeps it: the excerpt and the whole log's hash."""
    result = run.get("result")
    checks = result.get("checks") if isinstance(result, dict) else None
    tests = checks.get("tests") if isinstance(checks, dict) else None
    details = tests.get("details") if isinstance(tests, dict) else None
    if not isinstance(details, dict) or "output_sha256" not in details:
        return None
    return {
        "run_id": run.get("id"),
        "status": tests.get("status") if isinstance(tests, dict) else None,
        "exit_code": details.get("exit_code"),
        "counts": details.get("counts"),
        "output_excerpt": details.get("output_excerpt"),
        "output_sha256": details.get("output_sha256"),
        "output_bytes": details.get("output_bytes"),
    }


def _check_tests(sid: str, runs: list[Any], tests: list[Any]) -> None:
    expected = [log for run in runs if (log := run_test_log(run)) is not None]
    if tests != expected:
        raise BundleError(
            "evidence_mismatch", f"session {sid!r}: test-logs.json is not the runs' test logs"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m audit.bundle FILE [--key-fingerprint FP]``: what `verifier evidence
    verify` does, for an auditor who has this package and not the verifier."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m audit.bundle", description=main.__doc__)
    parser.add_argument("bundle", help="the evidence bundle (.tar.gz or .tar)")
    parser.add_argument("--key-fingerprint", metavar="FP", help="the signing key to require")
    args = parser.parse_args(argv)
    try:
        with open(args.bundle, "rb") as stream:
            data = stream.read()
    except OSError as exc:
        parser.error(f"cannot read {args.bundle!r}: {exc.strerror}")
    try:
        verified = verify_bundle(data, args.key_fingerprint)
    except BundleError as exc:
        print(f"reason: {exc.reason}\n{exc.message}")
        return 1
    print(json.dumps(verified.to_dict(), indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
